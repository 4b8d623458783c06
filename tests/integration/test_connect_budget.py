"""A fleet larger than its connect budget: never more attempts in flight, and every host in."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import asyncssh
import pytest

from console.fleet.fleet import Fleet
from console.hosts.profiles import load_fleet
from console.sim.fleet import SimFleet
from console.sim.sglang import Timing
from console.transport.ssh import ConnectBudget, ConnState

HOSTS = 40
BUDGET = 4


async def test_forty_hosts_under_a_budget_of_four(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sim = SimFleet(tmp_path / "sim", hosts=HOSTS, timing=Timing(load_s=0.3, decode_interval_s=5))
    await sim.start()
    # Counted around asyncssh itself, not by the budget: what actually reached the network.
    in_flight = peak = 0
    real_connect = asyncssh.connect

    async def counted(*args: Any, **kwargs: Any) -> asyncssh.SSHClientConnection:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        try:
            await asyncio.sleep(0.05)  # a slow link: without the budget all 40 would overlap
            return await real_connect(*args, **kwargs)
        finally:
            in_flight -= 1

    monkeypatch.setattr(asyncssh, "connect", counted)  # as console.transport.ssh calls it
    fleet = Fleet(load_fleet(sim.profiles_dir), connect_budget=BUDGET, history=0, health_s=0)
    try:
        fleet.start()
        connected = await asyncio.gather(*(s.wait_connected(60) for s in fleet.sessions.values()))
        assert all(connected)
        assert all(s.state.state is ConnState.CONNECTED for s in fleet.sessions.values())
        assert peak == BUDGET  # the budget was used, and never exceeded
        assert fleet.connect_budget.in_flight == 0
        assert len(fleet.sessions) == HOSTS
    finally:
        await fleet.stop()
        await sim.stop()


def test_a_budget_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="connect budget of 0"):
        ConnectBudget(0)
