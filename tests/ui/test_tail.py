"""The tail pauses only when the operator asks: panels and prompts never pause it, an empty
search ends the search, and a paused view says how to resume and what it is holding back."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from console.app import SpecopsApp
from console.fleet.fleet import Fleet
from console.hosts.profiles import load_fleet
from console.sim.fleet import SimFleet
from tests.ui.support import simulated_fleet, until
from widgets.journal_view import JournalView, PromptInput
from widgets.snapshot_panel import SnapshotPanel

UNIT = "sglang-k26-ddtree.service"


@pytest.fixture
async def sim(tmp_path: Path) -> AsyncIterator[SimFleet]:
    async with simulated_fleet(tmp_path, hosts=1, decode_interval_s=0.1) as fleet:
        yield fleet


async def test_the_snapshot_panel_and_the_prompt_leave_the_tail_running(sim: SimFleet) -> None:
    app = SpecopsApp(Fleet(load_fleet(sim.profiles_dir)))
    async with app.run_test(size=(140, 40)) as pilot:
        view = app.query_one(JournalView)
        await pilot.press("a")
        await until(pilot, lambda: view.max_scroll_y > 5)
        host = sim.hosts["b300"]
        host.freeze()  # the snapshot stays in progress: the panel stays open
        await pilot.press("s")
        panel = app.query_one(SnapshotPanel)
        await until(pilot, lambda: panel.display and panel.region.height > 2)
        host.thaw()
        await pilot.pause(0.2)
        assert not view.paused and "paused" not in str(view.border_subtitle)
        shown = len(view.lines)
        await until(pilot, lambda: len(view.lines) > shown + 3)
        await until(pilot, lambda: view.is_vertical_scroll_end)  # the newest line on screen
        await app.workers.wait_for_complete()
        await pilot.press("escape", "slash")  # the search prompt takes a row too
        assert app.query_one("#search", PromptInput).has_focus
        await pilot.pause(0.3)
        assert not view.paused and view.is_vertical_scroll_end
        await pilot.press("q")


async def test_an_empty_search_ends_the_search_and_resumes(sim: SimFleet) -> None:
    app = SpecopsApp(Fleet(load_fleet(sim.profiles_dir)))
    async with app.run_test(size=(140, 40)) as pilot:
        view = app.query_one(JournalView)
        await pilot.press("a")
        await until(pilot, lambda: sum("Decode batch" in line for line in view.lines) > 40)
        await pilot.press("slash", *"Capture cuda graph end", "enter")
        assert view.search_term == "Capture cuda graph end" and view.paused
        assert "G or p resumes" in str(view.border_subtitle)
        await pilot.press("slash")
        prompt = app.query_one("#search", PromptInput)
        assert prompt.value == ""  # not the last term again: enter now ends the search
        await pilot.press("enter")
        assert view.search_term is None and not view.paused
        assert "search" not in str(view.border_subtitle)
        await pilot.press("q")


async def test_a_crash_while_paused_is_announced_in_the_paused_view(sim: SimFleet) -> None:
    app = SpecopsApp(Fleet(load_fleet(sim.profiles_dir)))
    async with app.run_test(size=(140, 40)) as pilot:
        view = app.query_one(JournalView)
        host = sim.hosts["b300"]
        await until(pilot, lambda: any("accept len" in line for line in view.lines))
        await pilot.press("p")
        for line in (
            "[2026-12-01 12:00:01 TP0] Scheduler hit an exception: Traceback (most recent call "
            "last):",
            "torch.AcceleratorError: CUDA error: an illegal memory access was encountered",
        ):
            host.journal.append(
                UNIT,
                line,
                _PID=str(host.unit.main_pid),
                SYSLOG_IDENTIFIER="python3",
                _SYSTEMD_INVOCATION_ID=host.unit.invocation_id,
            )
        await until(pilot, lambda: view.crashes_while_paused == 1)
        subtitle = str(view.border_subtitle)
        assert "1 crash (A lists)" in subtitle and "G or p resumes" in subtitle
        await pilot.press("G")
        assert not view.paused and "crash" not in str(view.border_subtitle)
        # The crash is announced by the engine's detector; the lines themselves reach the view
        # in the next journal batch, which may come a frame after the resume.
        await until(pilot, lambda: any("illegal memory access" in line for line in view.lines))
        await pilot.press("q")
