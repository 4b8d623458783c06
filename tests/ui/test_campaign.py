"""`C`: a tuning campaign from the TUI, as an operator runs one: the grid typed and checked,
the plan shown, `y` starts it, the grid fills in (the crashing cell recorded with its
signature), the host ends where it started; `x` stops after the current cell."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from textual import events
from textual.pilot import Pilot
from textual.widgets import DataTable, Input, Static

from console.app import SpecopsApp
from console.fleet.fleet import Fleet
from console.hosts.profiles import load_fleet
from console.sim.fleet import SimFleet
from tests.ui.support import simulated_fleet, until
from widgets.campaign_setup import CampaignSetupScreen
from widgets.campaign_view import CampaignScreen
from widgets.flag_editor import FlagEditorScreen

UNIT = "sglang-k26-ddtree.service"
RUN_S = 120.0


@pytest.fixture
async def fleet(tmp_path: Path) -> AsyncIterator[SimFleet]:
    async with simulated_fleet(tmp_path, hosts=1, decode_interval_s=0.1) as sim:
        yield sim


def text_of(static: Static) -> str:
    return str(static.render())


def campaign_records(sim: SimFleet) -> list[dict[str, Any]]:
    """The campaign records on the host's side (not read through specops)."""
    found = sim.hosts["b300"].local(f"/var/lib/specops/{UNIT}/campaigns")
    return [json.loads(p.read_text()) for p in sorted(found.glob("*.json"))]


async def open_setup(app: SpecopsApp, pilot: Pilot[int]) -> CampaignSetupScreen:
    await until(pilot, lambda: "budget" in getattr(app.fleet.status.get("b300"), "flags", {}))
    await pilot.press("C")
    await until(pilot, lambda: isinstance(app.screen, CampaignSetupScreen))
    setup = app.screen
    assert isinstance(setup, CampaignSetupScreen)
    return setup


async def fill(pilot: Pilot[int], grid: str, soak: str, measure: str) -> None:
    await pilot.press(*grid, "tab", *soak, "tab", "ctrl+u", *measure, "enter")


def outcomes(screen: CampaignScreen) -> dict[str, str]:
    table: DataTable[Any] = screen.query_one(DataTable)
    return {
        str(key.value): str(table.get_cell(key, "outcome"))
        for key in (row.key for row in table.ordered_rows)
    }


async def test_bad_input_is_named_and_nothing_reaches_the_host(fleet: SimFleet) -> None:
    app = SpecopsApp(Fleet(load_fleet(fleet.profiles_dir)))
    async with app.run_test(size=(120, 40)) as pilot:
        setup = await open_setup(app, pilot)
        error = setup.query_one("#campaign-error", Static)
        await fill(pilot, "budget=x", "", "5")
        await until(pilot, lambda: "budget" in text_of(error) and "'x'" in text_of(error))
        # The field at fault has the focus: the keys that follow correct it.
        await pilot.press("ctrl+a", "ctrl+k", *"speed=1", "enter")
        await until(pilot, lambda: "no such flag" in text_of(error) and "speed" in text_of(error))
        await pilot.press("ctrl+a", "ctrl+k", *"budget=4", "tab", "tab", "ctrl+u", "0", "enter")
        await until(pilot, lambda: "measure '0'" in text_of(error))
        assert setup.prepared is None and not setup.has_class("-review")
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, CampaignSetupScreen))
        assert campaign_records(fleet) == []  # nothing was written on the host
        await pilot.press("q")


async def test_keys_typed_in_one_burst_reach_the_form_in_order(fleet: SimFleet) -> None:
    """As tmux delivers `C typo Enter C-a C-k budget=4,16 BSpace 8 Tab 2 Tab C-u 4` from one
    send-keys: the keys after `C` reach the form it opens (not the journal behind it), and
    the line keys (home, delete to the end or the start, backspace) apply in turn with the
    characters, not after them."""
    app = SpecopsApp(Fleet(load_fleet(fleet.profiles_dir)))
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: "budget" in getattr(app.fleet.status.get("b300"), "flags", {}))
        keys = [("C", "C"), *[(c, c) for c in "typo"], ("enter", "\r"), ("ctrl+a", None)]
        keys += [("ctrl+k", None), *[(c, c) for c in "budget=4,16"], ("backspace", None)]
        keys += [("8", "8"), ("tab", "\t"), ("2", "2"), ("tab", "\t"), ("ctrl+u", None)]
        keys += [("4", "4")]
        for key, char in keys:
            app.post_message(events.Key(key, char))
        await until(pilot, lambda: isinstance(app.screen, CampaignSetupScreen))
        setup = app.screen
        fields = [setup.query_one(f"#{n}", Input) for n in ("grid", "soak", "measure")]
        await until(pilot, lambda: [f.value for f in fields] == ["budget=4,18", "2", "4"])
        assert "typo" in text_of(setup.query_one("#campaign-error", Static))
        await pilot.press("escape", "q")


async def test_a_campaign_fills_its_grid_and_ends_where_it_started(fleet: SimFleet) -> None:
    app = SpecopsApp(Fleet(load_fleet(fleet.profiles_dir)))
    async with app.run_test(size=(120, 40)) as pilot:
        setup = await open_setup(app, pilot)
        await fill(pilot, "budget=4,16", "1", "1")
        await until(pilot, lambda: setup.prepared is not None)
        plan = text_of(setup.query_one("#campaign-plan-text", Static))
        assert "2 cells" in plan and "budget=4" in plan and "budget=16" in plan
        assert "starts from budget=8" in plan
        await pilot.press("y")
        await until(pilot, lambda: isinstance(app.screen, CampaignScreen))
        screen = app.screen
        assert isinstance(screen, CampaignScreen)
        assert list(outcomes(screen)) == ["base", "1", "2"]  # the baseline leads from the start
        # Another change on the host is refused while the campaign owns it.
        await pilot.press("escape")
        await pilot.press("f")
        await pilot.pause(0.2)
        assert not isinstance(app.screen, FlagEditorScreen)
        await pilot.press("C")  # the running campaign's screen again, drawn from its record
        await until(pilot, lambda: isinstance(app.screen, CampaignScreen))
        screen = app.screen
        assert isinstance(screen, CampaignScreen)
        await until(pilot, lambda: screen.finished, timeout=RUN_S)
        assert outcomes(screen) == {"base": "baseline", "1": "measured", "2": "crashed"}
        table: DataTable[Any] = screen.query_one(DataTable)
        assert table.get_cell("2", "why") == "illegal_memory_access"
        end = text_of(screen.query_one("#campaign-end", Static))
        assert end.startswith("finished: on the configuration it started on: budget=8")
        (record,) = campaign_records(fleet)
        assert record["state"] == "finished"
        await until(pilot, lambda: app.fleet.status["b300"].flags.get("budget") == 8)
        await pilot.press("escape", "q", "q")


async def test_x_stops_after_the_current_cell_and_puts_the_host_back(fleet: SimFleet) -> None:
    app = SpecopsApp(Fleet(load_fleet(fleet.profiles_dir)))
    async with app.run_test(size=(80, 24)) as pilot:
        setup = await open_setup(app, pilot)
        # End on the fastest cell (the checkbox), back to the measure field, enter.
        keys = ("tab", "tab", "ctrl+u", "1", "tab", "space", "shift+tab", "enter")
        await pilot.press(*"budget=4,6,10", *keys)
        await until(pilot, lambda: setup.prepared is not None)
        assert "ends on the fastest cell" in text_of(setup.query_one("#campaign-plan-text", Static))
        await pilot.press("y")
        await until(pilot, lambda: isinstance(app.screen, CampaignScreen))
        screen = app.screen
        assert isinstance(screen, CampaignScreen)
        await until(pilot, lambda: outcomes(screen)["1"] == "running", timeout=RUN_S)
        await pilot.press("x")
        assert "stopping after this cell" in text_of(screen.query_one("#campaign-progress", Static))
        await until(pilot, lambda: screen.finished, timeout=RUN_S)
        assert outcomes(screen) == {
            "base": "baseline",
            "1": "measured",
            "2": "pending",
            "3": "pending",
        }
        (record,) = campaign_records(fleet)
        assert record["state"] == "stopped" and record["keep"] == "original"
        assert text_of(screen.query_one("#campaign-end", Static)).startswith("stopped: on the")
        await until(pilot, lambda: app.fleet.status["b300"].flags.get("budget") == 8)
        await pilot.press("escape", "q")
