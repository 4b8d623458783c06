"""A simulated fleet on the test's own event loop (a server on an idle loop never answers)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from console.hosts.profiles import Profile
from console.sim.fleet import SimFleet
from console.sim.sglang import Timing

FAST = Timing(load_s=0.3, decode_interval_s=0.1)


@pytest.fixture
async def sim(tmp_path: Path) -> AsyncIterator[SimFleet]:
    fleet = SimFleet(tmp_path / "sim", hosts=2, timing=FAST, keepalive_s=0.5)
    await fleet.start()
    yield fleet
    await fleet.stop()


@pytest.fixture
def profiles(sim: SimFleet) -> list[Profile]:
    from console.hosts.profiles import load_fleet

    return load_fleet(sim.profiles_dir)
