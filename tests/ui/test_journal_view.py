"""The journal view driven by keys: filter, all lines, edited filter, pause, search, merge."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from textual.message import Message
from textual.notifications import Notify
from textual.pilot import Pilot
from textual.widgets import Log

from console.app import SpecopsApp
from console.fleet.fleet import Fleet
from console.hosts.profiles import load_fleet
from console.sim.fleet import SimFleet
from console.watch.journal import LineFilter
from tests.ui.support import simulated_fleet, until
from widgets.journal_view import JournalView, PromptInput
from widgets.line_log import LineLog


@pytest.fixture
async def sim(tmp_path: Path) -> AsyncIterator[SimFleet]:
    async with simulated_fleet(tmp_path, hosts=2, decode_interval_s=0.1) as fleet:
        yield fleet


async def type_into(pilot: Pilot[int], text: str) -> None:
    """Type into the open prompt and submit (the first keys typed, the rest pasted)."""
    prompt = pilot.app.focused
    assert isinstance(prompt, PromptInput)
    prompt.value = ""
    await pilot.press(*text[:3])
    prompt.insert_text_at_cursor(text[3:])
    await pilot.press("enter")


async def test_filter_all_lines_and_an_edited_filter(sim: SimFleet) -> None:
    profiles = load_fleet(sim.profiles_dir)
    patterns = LineFilter(profiles[0].journal.patterns)
    messages: list[Message] = []
    app = SpecopsApp(Fleet(profiles))
    async with app.run_test(size=(140, 40), message_hook=messages.append) as pilot:
        view = app.query_one(JournalView)
        await until(pilot, lambda: any("accept len" in line for line in view.lines))
        # Default: the profile's patterns. The start-up history is filtered out.
        assert all(any(r.search(line) for r in patterns._regexes) for line in view.lines)
        assert not any("Load weight" in line for line in view.lines)
        assert view.border_subtitle == "profile patterns"

        await pilot.press("a")
        assert view.show_all and view.border_subtitle == "all lines"
        assert any("Load weight end" in line for line in view.lines)
        assert any("The server is fired up" in line for line in view.lines)
        await pilot.press("a")
        assert not any("Load weight" in line for line in view.lines)

        await pilot.press("e")
        prompt = app.query_one("#filter", PromptInput)
        assert prompt.has_focus and prompt.value == "|".join(profiles[0].journal.patterns)
        await type_into(pilot, "Prefill batch")
        assert not prompt.has_class("-open") and view.has_focus
        await until(pilot, lambda: view.lines)
        assert all("Prefill batch" in line for line in view.lines)
        assert view.border_subtitle == "filter: Prefill batch"

        await pilot.press("e")
        await type_into(pilot, "accept (len")  # a typo: refused, named, filter unchanged
        assert prompt.has_class("-open")
        assert any(
            "'accept (len' is not a valid regular expression" in str(m.notification.message)
            for m in messages
            if isinstance(m, Notify)
        )
        await pilot.press("escape")
        assert view.border_subtitle == "filter: Prefill batch"
        await pilot.press("e")
        prompt.value = ""
        await pilot.press("enter")  # empty: back to the profiles' patterns
        assert view.custom_filter is None and view.border_subtitle == "profile patterns"


async def test_pause_by_key_and_by_scrolling_then_resume(sim: SimFleet) -> None:
    app = SpecopsApp(Fleet(load_fleet(sim.profiles_dir)))
    async with app.run_test(size=(140, 40)) as pilot:
        view = app.query_one(JournalView)
        await pilot.press("a")  # every line: enough to scroll
        await until(pilot, lambda: view.max_scroll_y > 5)

        await pilot.press("p")
        shown = len(view.lines)
        await until(pilot, lambda: view.pending_lines >= 10)
        assert len(view.lines) == shown  # nothing moves while paused
        assert view.has_class("-paused") and "new lines · G or p resumes" in str(
            view.border_subtitle
        )
        await pilot.press("G")
        assert len(view.lines) > shown and view.pending_lines == 0 and not view.paused
        assert view.is_vertical_scroll_end

        view.scroll_to(y=0, animate=False, immediate=True)  # the reader scrolls up
        await pilot.pause(0.05)
        top = view.lines[0]
        await until(pilot, lambda: view.pending_lines >= 10)
        assert view.scroll_offset.y == 0 and view.lines[0] == top
        await pilot.press("end")
        assert not view.paused and view.is_vertical_scroll_end
        assert "paused" not in str(view.border_subtitle)


async def test_search_and_merged_view(sim: SimFleet) -> None:
    app = SpecopsApp(Fleet(load_fleet(sim.profiles_dir)))
    async with app.run_test(size=(140, 40)) as pilot:
        view = app.query_one(JournalView)
        await pilot.press("a")
        await until(pilot, lambda: sum("Decode batch" in line for line in view.lines) > 15)

        await pilot.press("slash")
        await type_into(pilot, "Capture cuda graph end")
        assert view.search_term == "Capture cuda graph end"
        assert len(view.search_matches) == 1
        (match,) = view.search_matches
        assert "Capture cuda graph end" in view.lines[match]
        assert view.scroll_offset.y <= match < view.scroll_offset.y + view.size.height
        assert view.paused  # reading a match: the tail stays put
        assert "search 'Capture cuda graph end': 1/1" in str(view.border_subtitle)
        await pilot.press("slash")
        await type_into(pilot, "accept len")
        assert len(view.search_matches) > 10
        first = view.search_index
        await pilot.press("n")
        assert view.search_index == first - 1  # one match older
        await pilot.press("N")
        assert view.search_index == first

        await pilot.press("G", "m")
        assert view.merged and view.border_title == "journal · all hosts"
        await until(pilot, lambda: {line.split(" │ ")[0].strip() for line in view.lines}
                    == {"b300", "pro6000"})  # fmt: skip
        assert all(re.match(r"(b300   |pro6000) │ ", line) for line in view.lines)
        await pilot.press("m")
        assert not view.merged and not any(" │ " in line for line in view.lines)


@pytest.mark.parametrize("kind", [JournalView, LineLog])
async def test_writing_lines_measures_them_without_a_worker(kind: type[Log]) -> None:
    """`Log` starts a thread worker per write to measure the lines; the views measure them
    themselves (a worker per flush was a thread start and a dozen objects of cyclic garbage):
    the journal view's own rows, and `LineLog` (the rollout's journal)."""
    from textual.app import App, ComposeResult

    class Bare(App[None]):
        def compose(self) -> ComposeResult:
            yield JournalView(100) if kind is JournalView else LineLog(max_lines=100)

    app = Bare()
    async with app.run_test(size=(40, 10)) as pilot:
        started: list[object] = []
        add_worker = app.workers.add_worker

        def spy(worker: Any, *args: Any, **kwargs: Any) -> None:
            started.append(worker)
            add_worker(worker, *args, **kwargs)

        app.workers.add_worker = spy  # type: ignore[method-assign]
        view = app.query_one(kind)
        view.write_lines(["short", "x" * 70, "tab\there", "宽字符" * 10])
        assert view.virtual_size.width == 70  # at once; the widest line, not the CJK one (60)
        view.write_lines(["宽字符" * 30])  # 90 characters, 180 cells
        assert view.virtual_size.width == 180
        assert list(view.lines)[-2:] == ["宽字符" * 10, "宽字符" * 30]
        await pilot.pause()
        assert started == []
