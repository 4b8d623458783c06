"""SVG snapshots of the main screens at fixed sizes (pytest-textual-snapshot).

Run `pytest tests/ui/test_screenshots.py --snapshot-update` after checking a change by eye.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from textual.pilot import Pilot

from console.app import SpecopsApp
from console.tuning.history_rows import HostHistory
from console.tuning.rollback import RollbackPlan
from tests.ui.scripted import (
    UNIT,
    ScriptedFleet,
    profiles,
    rollout_events,
    scripted_crash,
    scripted_history,
    scripted_plan,
    snapshot_report,
)
from widgets.history_view import HistoryScreen
from widgets.messages import CrashReceived
from widgets.rollback_confirm import RollbackConfirmScreen
from widgets.rollout_view import RolloutScreen
from widgets.snapshot_panel import SnapshotPanel


def app() -> SpecopsApp:
    return SpecopsApp(ScriptedFleet(profiles()))


async def settle(pilot: Pilot[Any]) -> None:
    await pilot.pause(0.4)  # the metrics and journal timers draw what the script delivered
    pilot.app.query_one("#journal").can_focus = True
    pilot.app._draw_freshness()  # type: ignore[attr-defined]  # ages: the frozen clock's


def test_main_screen_wide(snap_compare: Any) -> None:
    assert snap_compare(app(), terminal_size=(160, 48), run_before=settle)


def test_main_screen_80x24(snap_compare: Any) -> None:
    assert snap_compare(app(), terminal_size=(80, 24), run_before=settle)


def test_help_screen(snap_compare: Any) -> None:
    async def run_before(pilot: Pilot[Any]) -> None:
        await settle(pilot)
        await pilot.press("question_mark")
        await pilot.pause(0.2)

    assert snap_compare(app(), terminal_size=(100, 40), run_before=run_before)


def test_flag_editor(snap_compare: Any) -> None:
    async def run_before(pilot: Pilot[Any]) -> None:
        await settle(pilot)
        await pilot.press("f")
        await pilot.pause(0.2)

    assert snap_compare(app(), terminal_size=(120, 36), run_before=run_before)


def test_snapshot_summary(snap_compare: Any, tmp_path: Path) -> None:
    async def run_before(pilot: Pilot[Any]) -> None:
        await settle(pilot)
        panel = pilot.app.query_one(SnapshotPanel)
        panel.start(["b300"])
        panel.finish(snapshot_report(Path("/home/op/k26-ddtree-repro")))
        await pilot.pause(0.2)

    assert snap_compare(app(), terminal_size=(120, 40), run_before=run_before)


MEDIUM = (120, 34)
SMALL = (80, 24)


def test_main_screen_120x34(snap_compare: Any) -> None:
    assert snap_compare(app(), terminal_size=MEDIUM, run_before=settle)


async def _alerts(pilot: Pilot[Any]) -> None:
    await settle(pilot)
    pilot.app.post_message(CrashReceived(scripted_crash()))
    await pilot.pause(0.1)
    pilot.app.clear_notifications()
    await pilot.press("A")
    await pilot.pause(0.2)


def test_alerts_80x24(snap_compare: Any) -> None:
    assert snap_compare(app(), terminal_size=SMALL, run_before=_alerts)


def test_alerts_120x34(snap_compare: Any) -> None:
    assert snap_compare(app(), terminal_size=MEDIUM, run_before=_alerts)


async def _flag_editor(pilot: Pilot[Any]) -> None:
    await settle(pilot)
    await pilot.press("f")
    await pilot.pause(0.2)
    await pilot.press("down", "down", "down", "down", "enter", *"2048", "enter")
    await pilot.pause(0.2)


def test_flag_editor_80x24(snap_compare: Any) -> None:
    assert snap_compare(app(), terminal_size=SMALL, run_before=_flag_editor)


def test_flag_editor_120x34(snap_compare: Any) -> None:
    assert snap_compare(app(), terminal_size=MEDIUM, run_before=_flag_editor)


async def _rollout(pilot: Pilot[Any]) -> None:
    await settle(pilot)
    profile = profiles()[0]
    screen = RolloutScreen(scripted_plan(profile))
    await pilot.app.push_screen(screen)
    await pilot.pause(0.1)
    for event in rollout_events(profile.name):
        screen.show(event)
    await pilot.pause(0.2)


def test_rollout_80x24(snap_compare: Any) -> None:
    assert snap_compare(app(), terminal_size=SMALL, run_before=_rollout)


def test_rollout_120x34(snap_compare: Any) -> None:
    assert snap_compare(app(), terminal_size=MEDIUM, run_before=_rollout)


async def _history(pilot: Pilot[Any]) -> None:
    await settle(pilot)
    found = scripted_history()

    async def loader() -> HostHistory:
        return found

    def planners(to: int | None, original: bool) -> Any:
        raise AssertionError("no rollback in a screenshot")

    await pilot.app.push_screen(HistoryScreen("b300", UNIT, loader, planners))
    await pilot.pause(0.3)


def test_history_80x24(snap_compare: Any) -> None:
    assert snap_compare(app(), terminal_size=SMALL, run_before=_history)


def test_history_120x34(snap_compare: Any) -> None:
    assert snap_compare(app(), terminal_size=MEDIUM, run_before=_history)


async def _rollback_confirm(pilot: Pilot[Any]) -> None:
    await settle(pilot)
    history = scripted_history()
    found = RollbackPlan(scripted_plan(profiles()[0]), history.entries[1])

    async def planner() -> RollbackPlan:
        return found

    what = "the previous good configuration"
    await pilot.app.push_screen(RollbackConfirmScreen("b300", UNIT, what, planner))
    await pilot.pause(0.3)


def test_rollback_confirm_80x24(snap_compare: Any) -> None:
    assert snap_compare(app(), terminal_size=SMALL, run_before=_rollback_confirm)
