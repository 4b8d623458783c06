"""`specops flags HOST`: the service's flags, from its effective ExecStart, beside last good.

Last good is the newest kept entry of the host's own history (console/tuning/history.py).
"""

from __future__ import annotations

import argparse
import asyncio
import json
from typing import Any

from rich.markup import escape
from rich.table import Table

from console.cli.common import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_UNREACHABLE,
    connect,
    err,
    iso,
    load_profiles,
    out,
)
from console.cli.status import RELOAD_PENDING
from console.hosts.profiles import FlagSpec, select
from console.service.catalogue import catalogue, deprecated_in
from console.service.flags import format_value, read_flags
from console.service.status import read_status
from console.service.unit import effective_service
from console.service.version import read_version
from console.transport import remote
from console.transport.ssh import Disconnected, HostSession, RemoteError
from console.tuning import history
from console.tuning.history import HistoryEntry, HistoryError, masked_argv
from console.tuning.left_on import read_left_on


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    flags = sub.add_parser("flags", parents=[common], help="the service's flags, from its unit")
    flags.add_argument("host", metavar="HOST")
    flags.add_argument("--json", action="store_true", help="one JSON object")


def run(args: argparse.Namespace) -> int:
    return asyncio.run(cmd_flags(args))


def _spec_record(spec: FlagSpec, value: Any, good: Any) -> dict[str, Any]:
    return {
        "value": value,
        "last_good": good,
        "type": spec.type,
        "arg": spec.arg,
        "env": spec.env,
        "inverted": spec.inverted,
        "min": spec.min,
        "max": spec.max,
        "choices": list(spec.choices) if spec.choices else None,
        "help": spec.help,
    }


async def cmd_flags(args: argparse.Namespace) -> int:
    (profile,) = select(load_profiles(args), [args.host])
    session = await connect(profile)
    if session is None:
        return EXIT_UNREACHABLE
    try:
        status = await read_status(session, with_flags=False)
        cat = await session.run(remote.systemctl_cat(profile.service.unit), timeout=30)
        service = effective_service(cat.stdout)
        # Secret values never leave the process: the table, --json and ExecStart mask them.
        values = profile.masked(read_flags(profile.flags, service.argv, service.environment))
        good = await _last_good(session)
        left = await read_left_on(session, values)
        version = await read_version(session, service.argv[0]) if service.argv else None
    except Disconnected as exc:
        err.print(str(exc), markup=False)
        return EXIT_UNREACHABLE
    except (RemoteError, ValueError) as exc:
        err.print(f"{profile.name}: {exc}", markup=False)
        return EXIT_FAILED
    finally:
        await session.close()
    good_values = dict(good.values) if good is not None else {}
    deprecated = deprecated_in(service.argv, catalogue().release_for(version))
    record: dict[str, Any] = {
        "host": profile.name,
        "unit": profile.service.unit,
        "sglang_version": version,
        "deprecated": [
            {
                "arg": d.arg,
                "status": d.status,
                "replacement": d.replacement,
                "since": d.since,
                "message": d.describe(),
            }
            for d in deprecated
        ],
        "active_state": status.active_state,
        "sub_state": status.sub_state,
        "invocation_id": status.invocation_id,
        "execstart": masked_argv(service.argv, profile.secret_names),
        "execstart_source": service.execstart_source,
        "need_daemon_reload": status.need_daemon_reload,
        "flags": {
            name: _spec_record(spec, values.get(name), good_values.get(name))
            for name, spec in profile.flags.items()
        },
        "last_good": None
        if good is None
        else {
            "saved_at": iso(good.finished_at or good.started_at),
            "history_entry": good.n,
            "invocation_id": good.invocation_id,
            "values": good_values,
        },
    }
    if left is not None:
        record["left_on"] = left.record()
    if args.json:
        print(json.dumps(record), flush=True)
        return EXIT_OK
    out.print(
        f"[b]{profile.name}[/b] · {profile.service.unit} · {status.active_state}/"
        f"{status.sub_state} · invocation {status.invocation_id[:12] or '-'}"
    )
    out.print(f"ExecStart from {escape(service.execstart_source or '?')}", style="dim")
    if status.need_daemon_reload:
        out.print(escape(RELOAD_PENDING), style="yellow", soft_wrap=True)
    if left is not None:  # the table below is the files'; this is what runs
        out.print(escape(left.text()), style="yellow", soft_wrap=True)
    if version is not None:
        out.print(f"SGLang {escape(version)}", style="dim")
    table = Table("flag", "value", "last good", "maps to", "type")
    table.add_column("help", ratio=1, min_width=12)
    for column in table.columns[:5]:
        column.no_wrap = True
        column.min_width = len(str(column.header))
    marks = {d.arg: d for d in deprecated}
    for name, spec in profile.flags.items():
        value = format_value(values.get(name))
        last = format_value(good_values[name]) if name in good_values else "-"
        if name in good_values and good_values[name] != values.get(name):
            last = f"[yellow]{escape(last)}[/yellow]"
        target = spec.arg or f"${spec.env}"
        if spec.inverted:  # `off │ no --disable-cuda-graph` read as a contradiction
            target = f"{target} when off"
        target = escape(target)
        mark = marks.get(spec.arg or "")
        if mark is not None:
            target += f" [yellow]({mark.status}: {escape(mark.replacement or 'no replacement')})"
            target += "[/yellow]"
        table.add_row(name, escape(value), last, target, _type_text(spec), spec.help)
    out.print(table)
    for d in deprecated:
        colour = "red" if d.refused else "yellow"
        out.print(f"[{colour}]![/{colour}] {escape(d.describe())}", soft_wrap=True)
    if good is not None:
        when = iso(good.finished_at or good.started_at)
        out.print(f"last good: history entry {good.n}, kept {when}", style="dim")
    return EXIT_OK


async def _last_good(session: HostSession) -> HistoryEntry | None:
    """The newest kept entry of the host's own history (any console's, any profile's)."""
    try:
        entries = await history.load(session, session.profile.service.unit)
    except HistoryError as exc:
        err.print(f"{session.profile.name}: {exc}", markup=False)
        return None
    return next((e for e in reversed(entries) if e.outcome == "kept"), None)


def _type_text(spec: FlagSpec) -> str:
    if spec.type == "choice" and spec.choices:
        return "|".join(spec.choices)
    if spec.min is not None or spec.max is not None:
        low = "" if spec.min is None else _number(spec.min)
        high = "" if spec.max is None else _number(spec.max)
        return f"{spec.type} {low}..{high}"
    return spec.type


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(value)
