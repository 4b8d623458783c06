"""`specops status`: connection, unit state and flags of every host, at once."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import time
from dataclasses import dataclass
from typing import Any

from rich.table import Table

from console.cli.common import EXIT_FAILED, EXIT_UNREACHABLE, load_profiles, new_session, out
from console.hosts.events import ServiceStatus
from console.hosts.profiles import Profile, Unusable, select
from console.service.flags import format_value
from console.service.status import read_status
from console.transport.host_files import state_refused
from console.transport.http import HttpError
from console.transport.ssh import ConnState, Disconnected, HostSession, HostState, RemoteError
from console.tuning import history
from console.tuning.history import HistoryError
from console.tuning.left_on import LeftOn, read_left_on
from console.tuning.probation import Probation, probation_of
from console.watch.gpu_reader import GpuReading, read_all
from console.watch.gpus import compact, gpus_of, summary
from console.watch.health import probe_health
from console.watch.server_metrics import MetricsUnavailable
from console.watch.sources import from_server


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    status = sub.add_parser("status", parents=[common], help="connection, unit state, flags")
    status.add_argument("hosts", nargs="*", metavar="HOST")
    status.add_argument("--json", action="store_true", help="one JSON object per host")


def run(args: argparse.Namespace) -> int:
    return asyncio.run(cmd_status(args))


@dataclass
class HostReport:
    """What `status` learned of one host."""

    state: HostState
    status: ServiceStatus | None = None
    error: str | None = None
    health: str | None = None
    """The `/health` answer (None when not connected)."""
    left: LeftOn | None = None
    """The configuration a change that did not end left the host on (None: as the files say)."""
    unwritable: str | None = None
    """Why the host's state directory cannot be written (None: it can, or it was not asked)."""
    probation: Probation | None = None
    """The kept change on probation, from the host's history (None: none)."""
    kv_cache: dict[str, float] | None = None
    """KV-cache use from the server's /metrics (None: no page, or nothing on it)."""
    gpus: GpuReading | None = None
    """The host's GPUs (None: not asked, the profile's `[gpu] enabled = false`)."""


async def _kv_cache(session: HostSession, profile: Profile) -> dict[str, float] | None:
    """The KV cache's use as SGLang's /metrics has it now; None without a page (a server
    started without --enable-metrics, or not answering)."""
    try:
        numbers = await from_server(session, profile, 0.0, timeout=5.0)
    except (MetricsUnavailable, HttpError, Disconnected):
        return None
    found = {
        "token_usage": numbers.token_usage,
        "used_tokens": numbers.used_tokens,
        "cache_hit_rate": numbers.cache_hit_rate,
    }
    kept = {k: v for k, v in found.items() if v is not None}
    return kept or None


async def _gpus(session: HostSession, profile: Profile) -> GpuReading | None:
    if not profile.gpu.enabled:
        return None
    try:  # and the Xid errors of the last ten minutes
        return (await read_all(session, profile.gpu, time.time(), None))[0]
    except RemoteError as exc:  # a timeout, or the link went: said, not fatal
        return GpuReading(profile.name, time.time(), problem=str(exc))


async def _status_one(profile: Profile) -> HostReport:
    session = new_session(profile)
    session.start()
    try:
        state = await session.wait_settled(profile.ssh.connect_timeout_s + 5)
        if state.state is not ConnState.CONNECTED:
            return HostReport(state)
        status_read, health, numbers, gpus = await asyncio.gather(
            read_status(session, with_version=True),
            probe_health(session),
            _kv_cache(session, profile),
            _gpus(session, profile),
            return_exceptions=True,
        )
        word = health if isinstance(health, str) else None
        if isinstance(status_read, Disconnected):  # lost after connecting: unreachable (3)
            lost = HostState(profile.name, ConnState.UNREACHABLE, str(status_read))
            return HostReport(lost, health=word)
        if isinstance(status_read, RemoteError | ValueError):
            return HostReport(state, error=str(status_read), health=word)
        if isinstance(status_read, BaseException):
            raise status_read
        report = HostReport(state, status_read, health=word)
        report.kv_cache = numbers if isinstance(numbers, dict) else None
        report.gpus = gpus if isinstance(gpus, GpuReading) else None
        report.left = await read_left_on(session, status_read.flags)
        try:
            report.unwritable = await state_refused(session)
        except RemoteError as exc:
            report.unwritable = f"its state directory could not be checked: {exc}"
        with contextlib.suppress(HistoryError, RemoteError):  # read_left_on said why
            entries = await history.load(session, profile.service.unit)
            report.probation = probation_of(
                profile.name, entries, profile.service.probation_s, time.time()
            )
        return report
    finally:
        await session.close()


DETAIL_IN_CELL = 28
"""A connection's detail longer than this (a changed key's two fingerprints) is printed
below the table, whole."""
RELOAD_PENDING = "NeedDaemonReload=yes: the flags are the files', not the running command's"
"""After an interrupted change the unit files on disk differ from what systemd runs."""


def _status_record(profile: Profile, report: HostReport) -> dict[str, Any]:
    state, status, health, left = report.state, report.status, report.health, report.left
    unwritable, error, probation = report.unwritable, report.error, report.probation
    record: dict[str, Any] = {
        "host": profile.name,
        "connection": state.state.value,
        "connected": state.state is ConnState.CONNECTED,
        "unit": profile.service.unit,
    }
    if profile.groups:
        record["groups"] = list(profile.groups)
    if state.detail:
        record["detail"] = state.detail
    if state.fingerprint:
        record["fingerprint"] = state.fingerprint
    record["health"] = health  # null when the host could not be asked: the key is always there
    if status is not None:
        record.update(
            active_state=status.active_state,
            sub_state=status.sub_state,
            invocation_id=status.invocation_id,
            n_restarts=status.n_restarts,
            need_daemon_reload=status.need_daemon_reload,
            sglang_version=status.sglang_version,
            flags=status.flags,
        )
    if report.kv_cache is not None:
        record["kv_cache"] = report.kv_cache
    if report.gpus is not None:
        record.update(report.gpus.record())
    if left is not None:
        record["left_on"] = left.record()
    if probation is not None:
        record["probation"] = {
            "entry": probation.entry.n,
            "kept_at": probation.kept_at,
            "until": probation.until,
            "left_s": round(probation.left_s(time.time())),
        }
    if status is not None:
        record["state_dir"] = {
            "path": profile.service.state_dir,
            "writable": unwritable is None,
            **({"problem": unwritable} if unwritable else {}),
        }
    if error:
        record["error"] = error
    return record


UNUSABLE = "unusable"
"""The connection of a host specops did not try: its inventory variables cannot be used."""


def _unusable_record(host: Unusable) -> dict[str, Any]:
    record: dict[str, Any] = {"host": host.name, "connection": UNUSABLE, "connected": False}
    if host.groups:
        record["groups"] = list(host.groups)
    return {**record, "unit": None, "health": None, "error": host.reason}


async def cmd_status(args: argparse.Namespace) -> int:
    profiles = select(load_profiles(args), args.hosts)
    results = await asyncio.gather(*(_status_one(p) for p in profiles))
    records = [_status_record(p, r) for p, r in zip(profiles, results, strict=True)]
    for host in getattr(args, "unusable", ()):  # an inventory host its variables make unusable
        records.append(_unusable_record(host))
    if args.json:
        for record in records:
            print(json.dumps(record), flush=True)
    else:
        # The unit's cell holds its state, invocation and release, one a line, so that at 80
        # columns the flags keep room for `max_running=256` whole.
        table = Table("host", "connection", "health", "unit", "flags")
        table.columns[3].min_width = len("NeedDaemonReload=yes")
        for r in records:
            conn = r["connection"]
            detail = r.get("detail", "")
            if detail and len(detail) <= DETAIL_IN_CELL:
                conn += f"\n{detail}"
            elif detail or r.get("fingerprint"):
                conn += "\n(see below)"  # a fingerprint cut at 80 columns is no fingerprint
            state = f"{r['active_state']}/{r['sub_state']}" if "active_state" in r else "-"
            if r.get("need_daemon_reload"):
                state += "\nNeedDaemonReload=yes"  # the flags shown are the files' (see flags)
            flags = "\n".join(f"{k}={format_value(v)}" for k, v in r.get("flags", {}).items())
            if r.get("invocation_id"):
                state += f"\ninvocation {r['invocation_id'][:12]}"
            if r.get("sglang_version"):
                state += f"\nSGLang {r['sglang_version']}"
            if "token_usage" in r.get("kv_cache", {}):
                state += f"\nKV cache {r['kv_cache']['token_usage']:.0%} used"
            if r.get("gpus"):
                state += f"\nGPU {compact(gpus_of(r))}"
            health = r["health"] or "-"
            table.add_row(r["host"], conn, health, state, flags or "-")
        out.print(table)
        for r in records:  # below the table: whole, whatever the width
            detail, offered = r.get("detail", ""), r.get("fingerprint", "")
            if len(detail) > DETAIL_IN_CELL:
                out.print(f"{r['host']}: {detail}", markup=False, soft_wrap=True)
            if offered and offered not in detail:
                out.print(f"{r['host']}: the host offers {offered}", markup=False, soft_wrap=True)
            if r.get("gpus"):
                out.print(f"{r['host']}: {summary(gpus_of(r))}", markup=False, soft_wrap=True)
            elif r.get("gpu_problem"):
                out.print(f"{r['host']}: {r['gpu_problem']}", markup=False, soft_wrap=True)
            if r["connection"] == UNUSABLE:
                out.print(f"{r['host']}: not tried: {r['error']}", markup=False, soft_wrap=True)
        for profile, report in zip(profiles, results, strict=True):
            for xid in report.gpus.xids if report.gpus is not None else ():
                out.print(
                    f"{profile.name}: {xid.text()}", style="red", markup=False, soft_wrap=True
                )
            left, unwritable, probation = report.left, report.unwritable, report.probation
            if left is not None:  # below the table: whole, whatever the width
                out.print(f"{profile.name} {left.text()}", markup=False, soft_wrap=True)
            if probation is not None:
                out.print(
                    f"{profile.name}: {probation.label(time.time())} (history entry "
                    f"{probation.entry.n}); a crash rolls it back only while `specops watch` "
                    "or the TUI runs",
                    style="cyan",
                    markup=False,
                    soft_wrap=True,
                )
            if unwritable is not None:
                out.print(
                    f"{profile.name}: {unwritable}", style="yellow", markup=False, soft_wrap=True
                )
    failed = any(not r["connected"] and r["connection"] != UNUSABLE for r in records)
    return (
        EXIT_UNREACHABLE if failed else (EXIT_FAILED if any("error" in r for r in records) else 0)
    )
