"""Restarts from before the console looked: a TUI opened after several runs in the last ten
minutes showed restarts `-`. The fleet reads systemd's start records once per host
(`journalctl -u UNIT MESSAGE_ID=…`, console/watch/unit_starts.py) and counts them, and the
journal's start-up read of the same runs does not count them again."""

from __future__ import annotations

import asyncio
import time

from console.fleet.fleet import Fleet
from console.hosts.profiles import Profile
from console.sim.fleet import SimFleet
from tests import pace


async def until(predicate: object, timeout: float = 10.0) -> None:
    deadline = pace.deadline(timeout)
    while not predicate():  # type: ignore[operator]
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(0.05)


async def test_runs_before_the_console_opened_are_in_the_restarts_column(
    sim: SimFleet, profiles: list[Profile]
) -> None:
    host = sim.hosts["b300"]
    for _ in range(3):  # four runs: the first start, then three restarts
        await host.unit.restart()
    fleet = Fleet(profiles, history=200)
    fleet.start()
    try:
        monitor = fleet.monitors["b300"]
        await until(lambda: monitor.restart_summary().recent == 3)
        await until(lambda: fleet.followers["b300"].restarts >= 1)  # the journal read too
        await asyncio.sleep(0.5)
        assert monitor.restart_summary().recent == 3  # counted once, not again
        assert fleet.monitors["pro6000"].restart_summary().recent == 0
    finally:
        await fleet.stop()
