"""`specops history HOST [--json]`: the configurations specops tried on a host, newest first.

The history lives on the host (`/var/lib/specops/UNIT/history.json`, console/tuning/history.py),
so every console and every profile naming that host reads the same entries and agrees on the
last good one. Read-only: one `cat` (through `sudo -n` when the profile says so).
"""

from __future__ import annotations

import argparse
import asyncio
import json
from typing import Any

from rich.markup import escape

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
from console.hosts.profiles import select
from console.service.flags import format_value
from console.transport.ssh import Disconnected, RemoteError
from console.tuning import history
from console.tuning.history import HistoryEntry, HistoryError
from console.tuning.history_rows import OUTCOME_STYLE, detail_lines


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    cmd = sub.add_parser(
        "history", parents=[common], help="the configurations tried on a host, with outcomes"
    )
    cmd.add_argument("host", metavar="HOST")
    cmd.add_argument("--json", action="store_true", help="one JSON object")


def run(args: argparse.Namespace) -> int:
    return asyncio.run(cmd_history(args))


def describe(entry: HistoryEntry) -> str:
    """One line: `3  kept  set  2026-…  budget=16 cuda_graph=off  (alice@laptop)`."""
    values = " ".join(f"{k}={format_value(v)}" for k, v in entry.values.items())
    outcome = entry.outcome
    if outcome == "started":
        outcome = "started (still running, or abandoned)"
    line = f"{entry.n:>3}  {outcome}  {entry.what}  {iso(entry.started_at)}  {values}"
    if entry.who:
        line += f"  ({entry.who})"
    return line


async def cmd_history(args: argparse.Namespace) -> int:
    (profile,) = select(load_profiles(args), [args.host])
    session = await connect(profile)
    if session is None:
        return EXIT_UNREACHABLE
    unit = profile.service.unit
    try:
        entries = await history.load(session, unit)
    except Disconnected as exc:
        err.print(str(exc), markup=False)
        return EXIT_UNREACHABLE
    except (HistoryError, RemoteError) as exc:
        err.print(f"specops: {profile.name}: {exc}", markup=False)
        return EXIT_FAILED
    finally:
        await session.close()
    good = history.last_good(entries)
    path = history.history_path(unit, profile.service.state_dir)
    if args.json:
        record = {
            "host": profile.name,
            "unit": unit,
            "path": path,
            "last_good": good.n if good is not None else None,
            "entries": [{**e.record(), "action": e.what} for e in reversed(entries)],
        }
        print(json.dumps(record), flush=True)
        return EXIT_OK
    if not entries:
        out.print(f"{profile.name}: no history in {path} (specops never changed {unit} there)")
        return EXIT_OK
    out.print(f"{profile.name} · {unit} · {path}", style="bold", soft_wrap=True)
    for entry in reversed(entries):
        style = OUTCOME_STYLE.get(entry.outcome, "")
        mark = "*" if good is not None and entry.n == good.n else " "
        text = f"{mark}{escape(describe(entry))}"
        out.print(f"[{style}]{text}[/{style}]" if style else text, soft_wrap=True)
        for line in detail_lines(entry):
            out.print(f"       {escape(line)}", style="dim", soft_wrap=True)
    if good is not None:
        out.print(f"* last good: entry {good.n} ({good.outcome})", soft_wrap=True)
    return EXIT_OK
