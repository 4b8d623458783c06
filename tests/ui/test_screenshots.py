"""SVG snapshots of the main screens at fixed sizes (pytest-textual-snapshot).

Run `pytest tests/ui/test_screenshots.py --snapshot-update` after checking a change by eye.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from textual.pilot import Pilot

from console.app import SpecopsApp
from tests.ui.scripted import ScriptedFleet, profiles, snapshot_report
from widgets.snapshot_panel import SnapshotPanel


def app() -> SpecopsApp:
    return SpecopsApp(ScriptedFleet(profiles()))


async def settle(pilot: Pilot[Any]) -> None:
    await pilot.pause(0.4)  # the metrics and journal timers draw what the script delivered
    pilot.app.query_one("#journal").can_focus = True


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
