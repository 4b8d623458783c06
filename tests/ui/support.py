"""What the Pilot tests share: simulated hosts, and waiting for a condition while the app
keeps running."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from textual.pilot import Pilot

from console.sim.fleet import SimFleet
from console.sim.sglang import Timing
from console.transport.ssh import ConnState
from tests import pace
from tests.stand_ins import FakeClock
from widgets.host_table import HostTable
from widgets.rollout_view import RolloutScreen


@contextlib.asynccontextmanager
async def simulated_fleet(
    tmp_path: Path, hosts: int, decode_interval_s: float, keepalive_s: float = 5.0
) -> AsyncIterator[SimFleet]:
    """Simulated hosts on the test's own loop, stopped (bounded) however the test ends."""
    sim = SimFleet(
        tmp_path / "sim",
        hosts=hosts,
        timing=Timing(load_s=0.3, decode_interval_s=decode_interval_s),
        keepalive_s=keepalive_s,
    )
    await sim.start()
    try:
        yield sim
    finally:
        await asyncio.wait_for(sim.stop(), 10)


async def until(pilot: Pilot[Any], predicate: Callable[[], object], timeout: float = 15) -> None:
    """Let the app run until `predicate()` holds; fail after `timeout` seconds."""
    deadline = pace.deadline(timeout)
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        await pilot.pause(0.05)


async def all_connected(pilot: Pilot[Any], table: HostTable, timeout: float = 15) -> None:
    """Until every host of the fleet table is connected."""
    await until(
        pilot,
        lambda: all(
            r.state and r.state.state is ConnState.CONNECTED for r in table.rows_by_name.values()
        ),
        timeout,
    )


def ticking(
    clock: FakeClock, predicate: Callable[[], object], step: float = 0.5
) -> Callable[[], bool]:
    """`predicate`, checked after moving `clock` on by `step`: what waits on the fleet's clock
    (health and status polls, back-off) runs as if `step` seconds passed between looks."""

    def check() -> bool:
        clock.advance(step)
        return bool(predicate())

    return check


async def applied(pilot: Pilot[Any], timeout: float = 40) -> RolloutScreen:
    """`y` on a reviewed change (the flag editor's or a rollback's diff): its rollout screen,
    once the rollout ended."""
    await pilot.press("y")
    await until(pilot, lambda: isinstance(pilot.app.screen, RolloutScreen))
    view = pilot.app.screen
    assert isinstance(view, RolloutScreen)
    await until(pilot, lambda: view.result is not None, timeout=timeout)
    return view
