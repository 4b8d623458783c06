"""One read of a host's GPUs through its session: the profile's program (`[gpu] command`,
`nvidia-smi` by default) with the query's arguments, parsed by `gpus.parse_gpus`.

A host without the program (an AMD host, a container without the driver's tools) is not an
error: the reading says `no GPU tool` and the poller says it once. A driver that does not
answer (`NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver`) is a
problem, with the tool's own first line. Each read also takes the Xid errors the kernel
logged since the last one (console/watch/xid_reader.py). Neither read is written to the audit
log: they run every few seconds and change nothing.
"""

from __future__ import annotations

import asyncio
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from console.hosts import clock as clocks
from console.hosts.clock import Clock
from console.hosts.profiles import GpuConfig
from console.transport import remote
from console.transport.ssh import ConnState, HostSession, RemoteError
from console.watch.gpus import QUERY, GpuQueryError, GpuState, parse_gpus
from console.watch.xid_reader import XidSeen, read_xids

NO_TOOL_FACTOR = 30
"""A host without the program is asked again this many intervals later (5 min by default):
a driver installed meanwhile is found, and nothing is asked every few seconds in vain."""

NOT_FOUND = 127
"""The shell's exit status for a program it cannot find (`docker exec` gives the same)."""


@dataclass(frozen=True)
class GpuReading:
    """What one read found: the GPUs, or why there are none."""

    host: str
    time: float
    gpus: tuple[GpuState, ...] = ()
    problem: str | None = None
    """Why there are no numbers (`no GPU tool: nvidia-smi: not found`, the driver's answer)."""
    no_tool: bool = field(default=False)
    """The program is not there: asking again every poll will not change that."""
    xids: tuple[XidSeen, ...] = ()
    """Xid errors the kernel logged since the reading before (the first: the last minutes)."""

    def record(self) -> dict[str, Any]:
        """`status --json`'s `gpus` (and `gpu_problem` when there is one)."""
        found: dict[str, Any] = {"gpus": [g.record() for g in self.gpus]}
        if self.problem is not None:
            found["gpu_problem"] = self.problem
        found["xids"] = [x.record() for x in self.xids]
        return found


def _first_line(*texts: str) -> str:
    for text in texts:
        for line in text.splitlines():
            if line.strip():
                return line.strip()[:200]
    return ""


async def read_gpus(
    session: HostSession, config: GpuConfig, now: float, *, audited: bool = False
) -> GpuReading:
    """The host's GPUs now (`audited`: written to the audit log, as part of an action).
    Raises what `session.run` raises for a link that went."""
    program = shlex.join(config.command)
    command = remote.gpu_query(config.command, QUERY[1:], audited=audited)
    result = await session.run(command, timeout=config.timeout_s, check=False)
    said = _first_line(result.stderr, result.stdout)
    if result.returncode == NOT_FOUND:
        return GpuReading(
            session.name, now, problem=f"no GPU tool: {said or program}", no_tool=True
        )
    if result.returncode != 0:
        return GpuReading(
            session.name, now, problem=f"`{program}` exit {result.returncode}: {said}"
        )
    try:
        gpus = parse_gpus(result.stdout)
    except GpuQueryError as exc:
        return GpuReading(session.name, now, problem=f"`{program}`: {exc}")
    return GpuReading(session.name, now, tuple(gpus))


async def read_all(
    session: HostSession, config: GpuConfig, now: float, after: str | None, *, audited: bool = False
) -> tuple[GpuReading, str | None]:
    """The GPUs and the Xids the kernel logged after cursor `after`, and the cursor to go on
    from. Raises what `session.run` raises for a link that went."""
    reading = await read_gpus(session, config, now, audited=audited)
    xids, cursor = await read_xids(session, after, reading.gpus, audited=audited)
    return replace(reading, xids=tuple(xids)), cursor


async def poll_gpus(
    session: HostSession,
    emit: Callable[[GpuReading], None],
    *,
    clock: Clock,
    shown: Callable[[], bool],
    wake: asyncio.Event,
) -> None:
    """Forever: the host's GPUs and new Xid errors every `[gpu] interval_s` while it is
    connected and on screen (`shown`); `wake` set reads at once, on screen or not (its row
    came on screen; a crash, whose Xid is wanted now). A reading is emitted when it has GPUs
    or Xids, and a problem only when it differs from the last one (said once, not per poll).
    A host without the tool is asked again only every `NO_TOOL_FACTOR` intervals, whatever
    wakes the poll meanwhile (a wake then reads the Xids alone)."""
    config = session.profile.gpu
    said: str | None = None
    cursor: str | None = None
    newest = 0.0  # the newest Xid emitted: a read from the start again does not repeat it
    quiet_until: float | None = None  # no tool: not asked again before this, woken or not
    while True:
        await session.wait_connected()
        woken = wake.is_set()
        wake.clear()
        wait = config.interval_s
        # Without the tool, a wake (a crash; a row back on screen as a dialog closes) reads
        # the kernel's Xids only: the tool was asked again at every dialog, not every
        # `NO_TOOL_FACTOR` intervals.
        quiet = quiet_until is not None and clock.monotonic() < quiet_until
        if quiet and not woken:
            await clocks.wait(clock, wake, (quiet_until or 0.0) - clock.monotonic())
            continue
        if woken or shown():
            try:
                if quiet:
                    xids, cursor = await read_xids(session, cursor)
                    reading = GpuReading(
                        session.name, clock.time(), problem=said, no_tool=True, xids=tuple(xids)
                    )
                else:
                    reading, cursor = await read_all(session, config, clock.time(), cursor)
            except RemoteError as exc:  # the link went, or the tool hung
                reading = GpuReading(session.name, clock.time(), problem=str(exc))
            if session.state.state is not ConnState.CONNECTED:
                continue  # closed (on demand) or lost during the read: nothing to report
            fresh = tuple(x for x in reading.xids if x.time > newest)
            newest = max([newest, *(x.time for x in fresh)])
            reading = replace(reading, xids=fresh)
            if reading.gpus or fresh or reading.problem != said:
                emit(reading)
            said = reading.problem
            if not reading.no_tool:
                quiet_until = None
            elif not quiet:
                quiet_until = clock.monotonic() + wait * NO_TOOL_FACTOR
            if quiet_until is not None:
                wait = max(0.0, quiet_until - clock.monotonic())
        await clocks.wait(clock, wake, wait)
