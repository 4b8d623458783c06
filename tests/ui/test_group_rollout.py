"""One change to several hosts from the TUI: mark them (`space`, or `M` for every host shown),
`f` edits their flags together, the review shows each set of alike diffs once, and `y` rolls
it out as `specops set HOST…` does: the canary alone, then waves; the first failure stops it
and the hosts after it are never touched."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from textual.pilot import Pilot
from textual.widgets import DataTable, Static

from console.app import SpecopsApp
from console.fleet.fleet import Fleet
from console.hosts.profiles import load_fleet
from console.sim.fleet import SimFleet
from console.sim.sglang import Timing
from console.tuning.group_plan import GroupPlan
from tests.ui.support import all_connected, until
from widgets.flag_editor import FlagEditorScreen
from widgets.group_rollout_view import GroupRolloutScreen
from widgets.host_table import HostTable

HISTORY = "/var/lib/specops/sglang-k26-ddtree.service/history.json"
CHANGING = ("systemctl restart", "tee ", "mv ")


@pytest.fixture
async def sim(tmp_path: Path) -> AsyncIterator[SimFleet]:
    fleet = SimFleet(tmp_path / "sim", hosts=3, timing=Timing(load_s=0.3, decode_interval_s=0.1))
    await fleet.start()
    try:
        yield fleet
    finally:
        await asyncio.wait_for(fleet.stop(), 10)


async def budget_review(app: SpecopsApp, pilot: Pilot[int], value: str) -> FlagEditorScreen:
    """`f` over the marked hosts, budget set to `value`, its review shown."""
    await pilot.press("f")
    await until(pilot, lambda: isinstance(app.screen, FlagEditorScreen))
    editor = app.screen
    assert isinstance(editor, FlagEditorScreen)
    await pilot.press("enter", "backspace", *value, "enter", "d")  # the budget row first
    await until(pilot, lambda: editor.plan is not None, timeout=30)
    return editor


def history_of(sim: SimFleet, host: str) -> list[dict[str, object]]:
    entries: list[dict[str, object]] = json.loads(sim.hosts[host].local(HISTORY).read_text())[
        "entries"
    ]
    return entries


async def test_marked_hosts_change_together_canary_first(sim: SimFleet) -> None:
    names = [p.name for p in load_fleet(sim.profiles_dir)]
    app = SpecopsApp(Fleet(load_fleet(sim.profiles_dir)))
    async with app.run_test(size=(140, 44)) as pilot:
        table = app.query_one(HostTable)
        await all_connected(pilot, table)
        await until(pilot, lambda: all(app.fleet.status.get(n) for n in names))
        await pilot.press("space", "tab", "space", "tab", "space")
        assert table.marked == names
        await pilot.press("tab", "space")  # the first again: unmarked
        assert table.marked == names[1:]
        await pilot.press("space")
        editor = await budget_review(app, pilot, "4")
        title = str(editor.query_one("#flag-title", Static).render())
        assert f"3 marked hosts: {', '.join(names)}" in title
        assert isinstance(editor.plan, GroupPlan)
        diff = str(editor.query_one("#flag-diff-text", Static).render())
        assert diff.count(f"# {', '.join(names)}") == 1  # alike hosts: their diff once
        assert "+    --speculative-num-draft-tokens 4" in diff
        await pilot.press("y")
        await until(pilot, lambda: isinstance(app.screen, GroupRolloutScreen))
        view = app.screen
        assert isinstance(view, GroupRolloutScreen)
        await until(pilot, lambda: view.outcome is not None, timeout=90)
        assert view.outcome is not None and view.outcome.ok
        assert view.wave_state == ["passed"] * 3
        assert "canary 1: " + names[0] in str(view.query_one("#group-waves", Static).render())
        rows = view.query_one(DataTable)
        assert [str(rows.get_cell(n, "state")) for n in names] == ["applied"] * 3
        outcome = str(view.query_one("#group-outcome", Static).render())
        assert f"on the new setting: {', '.join(names)}" in outcome
        # One experiment across the hosts: the same rollout id on each host's entry, the
        # canary's soak passed before the next host restarted.
        newest = [history_of(sim, n)[-1] for n in names]
        assert {e["rollout"] for e in newest} == {view.rollout}
        assert all(e["outcome"] == "kept" and e["action"] == "group-set" for e in newest)
        assert newest[0]["finished_at"] <= newest[1]["started_at"]  # type: ignore[operator]
        await pilot.press("escape", "q")


async def test_a_failing_host_stops_the_rollout_and_the_rest_are_never_touched(
    sim: SimFleet,
) -> None:
    names = [p.name for p in load_fleet(sim.profiles_dir)]
    sim.hosts[names[1]].lacks.add("journalctl")  # the second wave's host cannot be changed
    app = SpecopsApp(Fleet(load_fleet(sim.profiles_dir)))
    async with app.run_test(size=(140, 44)) as pilot:
        table = app.query_one(HostTable)
        await all_connected(pilot, table)
        await pilot.press("M")  # every host shown
        assert table.marked == names
        await budget_review(app, pilot, "4")
        await pilot.press("y")
        await until(pilot, lambda: isinstance(app.screen, GroupRolloutScreen))
        view = app.screen
        assert isinstance(view, GroupRolloutScreen)
        await until(pilot, lambda: view.outcome is not None, timeout=90)
        assert view.outcome is not None and not view.outcome.ok
        assert view.wave_state == ["passed", "stopped", "not started"]
        rows = view.query_one(DataTable)
        assert str(rows.get_cell(names[0], "state")) == "applied"
        assert str(rows.get_cell(names[2], "state")) == "never touched"
        outcome = str(view.query_one("#group-outcome", Static).render())
        assert f"never touched: {names[2]}" in outcome
        assert not any(c.startswith(CHANGING) for c in sim.hosts[names[2]].commands)
        await pilot.press("escape")
        await pilot.press("M")  # all marked already: the marks are cleared
        assert table.marked == []
        await pilot.press("q")


async def test_hosts_on_different_releases_are_refused_in_the_editor(tmp_path: Path) -> None:
    timing = Timing(load_s=0.3, decode_interval_s=0.1)
    sim = SimFleet(tmp_path / "mixed", hosts=2, timing=timing, versions=("0.5.9-ddtree", "0.5.23"))
    await sim.start()
    try:
        app = SpecopsApp(Fleet(load_fleet(sim.profiles_dir)))
        async with app.run_test(size=(140, 44)) as pilot:
            await all_connected(pilot, app.query_one(HostTable))
            await pilot.press("M", "f")
            await until(pilot, lambda: isinstance(app.screen, FlagEditorScreen))
            editor = app.screen
            assert isinstance(editor, FlagEditorScreen)
            await pilot.press("enter", "backspace", "4", "enter", "d")
            error = editor.query_one("#flag-error", Static)
            await until(pilot, lambda: "different SGLang releases" in str(error.render()))
            assert editor.plan is None
            await pilot.press("escape", "q")
        for host in sim.hosts.values():
            assert not any(c.startswith(CHANGING) for c in host.commands)
    finally:
        await asyncio.wait_for(sim.stop(), 10)
