"""When the unit started before the console looked: systemd's own start records.

The restarts column counts runs the console saw begin; a console opened after seven runs in
ten minutes showed `-`. systemd logs every finished start job (`Started …`, MESSAGE_ID
39f53479…) with the new run's INVOCATION_ID, and every automatic restart it schedules
(`Scheduled restart job …`, MESSAGE_ID 5eb03494…): one filtered `journalctl` read gives
both for the last ten minutes, a handful of entries however much the server logged.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from console.transport import remote
from console.transport.ssh import HostSession


@dataclass(frozen=True)
class UnitStarts:
    starts: list[tuple[float, str]] = field(default_factory=list)
    """(host-clock time, invocation id) of each start, oldest first."""
    automatic: list[float] = field(default_factory=list)
    """Host-clock times of the automatic restarts systemd scheduled."""


def parse_starts(lines: list[str]) -> UnitStarts:
    found = UnitStarts()
    for line in lines:
        try:
            entry = json.loads(line)
            at = int(entry["__REALTIME_TIMESTAMP"]) / 1e6 if isinstance(entry, dict) else None
        except (ValueError, KeyError, TypeError):
            continue
        if at is None:
            continue
        kind = entry.get("MESSAGE_ID")
        invocation = entry.get("INVOCATION_ID")
        if kind == remote.UNIT_STARTED and isinstance(invocation, str) and invocation:
            found.starts.append((at, invocation))
        elif kind == remote.UNIT_RESTART_SCHEDULED:
            found.automatic.append(at)
    return found


async def read_starts(session: HostSession, unit: str, since_s: float) -> UnitStarts:
    """The unit's starts and automatic restarts within the last `since_s` seconds. Raises
    RemoteError."""
    result = await session.run(remote.unit_starts(unit, int(since_s)), check=False, timeout=15)
    return parse_starts(result.stdout.splitlines())
