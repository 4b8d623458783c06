"""In the TUI, a crash after a kept change (probation) is rolled back by itself, after a
countdown shown with the key that cancels it; `x` cancels and leaves the host alone.

The change is kept before the app starts, so the app knows the probation from the host's own
history. The simulated host dies in cuBLAS seconds after ready (on a real host: minutes).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from console.app import SpecopsApp
from console.fleet.fleet import Fleet
from console.hosts.events import RolloutOutcome
from console.hosts.profiles import load_fleet
from console.ledger import ledger
from console.sim.failures import FailureTiming
from console.sim.fleet import SimFleet
from console.sim.sglang import Timing
from console.tuning.rollout import RolloutOptions
from tests.integration.test_rollout import change, connect
from tests.ui.support import until
from widgets.probation_banner import ProbationBanner
from widgets.rollout_view import RolloutScreen

UNIT = "sglang-k26-ddtree.service"
DROPIN = f"/etc/systemd/system/{UNIT}.d/zz-specops.conf"
HISTORY = f"/var/lib/specops/{UNIT}/history.json"
CRASH_AFTER_S = 6.0
KEEP = RolloutOptions(poll_s=0.2, settle_s=5.0, soak_s=1.0)


@pytest.fixture
async def sim(tmp_path: Path) -> AsyncIterator[SimFleet]:
    late = FailureTiming(requests=200, cublas_after_s=CRASH_AFTER_S)
    timing = Timing(load_s=0.3, decode_interval_s=0.1, failures=late)
    fleet = SimFleet(tmp_path / "sim", hosts=1, timing=timing, soak_s=1.0)
    await fleet.start()
    yield fleet
    await fleet.stop()


def countdown(sim: SimFleet, seconds: float) -> None:
    path = sim.profiles_dir / "b300.toml"
    text = path.read_text()
    path.write_text(text.replace("soak_s = 1\n", f"soak_s = 1\nrollback_countdown_s = {seconds}\n"))


async def keep_max_running_256(sim: SimFleet) -> None:
    session = await connect(load_fleet(sim.profiles_dir)[0])
    try:
        result, _ = await change(session, "max_running=256", options=KEEP)
        assert result.outcome is RolloutOutcome.APPLIED, result.reason
    finally:
        await session.close()


def history(sim: SimFleet) -> list[dict[str, object]]:
    entries: list[dict[str, object]] = json.loads(sim.hosts["b300"].local(HISTORY).read_text())[
        "entries"
    ]
    return entries


async def test_a_crash_on_probation_is_rolled_back_after_the_countdown(sim: SimFleet) -> None:
    countdown(sim, 1)
    await keep_max_running_256(sim)
    app = SpecopsApp(Fleet(load_fleet(sim.profiles_dir)))
    async with app.run_test(size=(150, 40)) as pilot:
        banner = app.query_one(ProbationBanner)
        await until(pilot, lambda: "on probation: b300 30m left" in banner.text())
        await until(pilot, lambda: "press x to cancel" in banner.text(), timeout=30)
        assert "cublas" in banner.text() and "rolling back to history entry 0" in banner.text()
        await until(pilot, lambda: isinstance(app.screen, RolloutScreen), timeout=15)
        screen = app.screen
        assert isinstance(screen, RolloutScreen)
        await until(pilot, lambda: screen.result is not None, timeout=60)
        assert screen.result is not None and screen.result.ok, screen.result
        await until(pilot, lambda: "probation rollback: back on history entry 0" in banner.text())
        await until(pilot, lambda: app.probation.state("b300") is None)  # a rollback: no probation
        await until(pilot, lambda: ledger.load("b300"))  # recorded after the outcome is shown
    assert not sim.hosts["b300"].local(DROPIN).exists()
    entries = history(sim)
    assert entries[1]["outcome"] == "rolled_back" and entries[1]["stage"] == "probation"
    assert entries[1]["signature"] == "cublas"
    assert entries[2]["kind"] == "rollback" and entries[2]["outcome"] == "kept"
    recorded = [(e.what.value, e.source) for _, e in ledger.load("b300")]
    assert recorded == [("probation-rollback", "tui")]
    assert entries[2]["action"] == "probation-rollback"


async def test_x_cancels_the_countdown_and_leaves_the_host_alone(sim: SimFleet) -> None:
    countdown(sim, 120)
    await keep_max_running_256(sim)
    app = SpecopsApp(Fleet(load_fleet(sim.profiles_dir)))
    async with app.run_test(size=(150, 40)) as pilot:
        banner = app.query_one(ProbationBanner)
        await until(pilot, lambda: "press x to cancel" in banner.text(), timeout=30)
        await pilot.press("x")
        await until(pilot, lambda: "b300: rollback cancelled; left alone" in banner.text())
        assert banner.countdowns == {}
        await until(pilot, lambda: history(sim)[1].get("stage") == "probation")
        await pilot.pause(1.0)
        assert not isinstance(app.screen, RolloutScreen)
    assert "--max-running-requests 256" in sim.hosts["b300"].local(DROPIN).read_text()
    entries = history(sim)
    assert len(entries) == 2 and entries[1]["outcome"] == "kept"
    assert "cancelled" in str(entries[1]["reason"])
