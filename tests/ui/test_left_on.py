"""The TUI says which configuration a change that did not finish left a host on (issue 20,
item 7), as `specops status` does: a notification naming it and an entry in the alerts list.

The change is made before the app starts, by `specops set` losing the link for good during
the soak: the host runs budget 4 and its history keeps the change's entry "started"."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from textual.widgets import Static

from console.app import SpecopsApp
from console.fleet.fleet import Fleet
from console.hosts.events import RolloutStep
from console.hosts.profiles import load_fleet
from console.sim.fleet import SimFleet
from tests.integration.test_dropped_link import set_losing_the_link_at
from tests.ui.support import simulated_fleet, until
from widgets.alerts import AlertsScreen

LEFT_ON = "b300 left on: budget=4 topk=4 cuda_graph=on nvls=off"


@pytest.fixture
async def sim(tmp_path: Path) -> AsyncIterator[SimFleet]:
    # Keepalives every 0.5 s: the dropped link is noticed within the rollout's reconnect_s.
    async with simulated_fleet(tmp_path, hosts=2, decode_interval_s=0.1, keepalive_s=0.5) as sim:
        yield sim


def notices(app: SpecopsApp) -> list[str]:
    return [" ".join(str(n.message).split()) for n in app._notifications]


async def test_a_host_left_on_an_unfinished_change_is_named_in_a_notice_and_the_alerts(
    sim: SimFleet, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert await set_losing_the_link_at(sim, RolloutStep.SOAK, monkeypatch) == 3
    app = SpecopsApp(Fleet(load_fleet(sim.profiles_dir)))
    async with app.run_test(size=(160, 44)) as pilot:
        await until(pilot, lambda: any(LEFT_ON in n for n in notices(app)), timeout=20)
        (notice,) = [n for n in notices(app) if "left on" in n]  # b300 only, and once
        assert "(set #1 by " in notice
        assert "never finished: the console stopped or lost the link (or still runs)" in notice
        await pilot.press("A")
        await until(pilot, lambda: isinstance(app.screen, AlertsScreen))
        listed = " ".join(str(app.screen.query_one("#alert-left-on", Static).render()).split())
        assert LEFT_ON in listed and "b300-2" not in listed
        await pilot.press("escape")
        await pilot.press("q")
