"""The journal view keeps raw rows and makes screen text only for the lines it draws."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest
from textual.app import App, ComposeResult
from textual.pilot import Pilot

import widgets.journal_view as journal_view
from console.hosts.events import JournalEntry
from widgets.journal_view import JournalView


def decode(n: int, host: str = "b300") -> JournalEntry:
    message = (
        f"[2026-12-01 21:40:10 TP0 req-{n:06d}] Decode batch, #running-req: 32,"
        f" #token: {41000 + n}, accept len: 4.31, accept rate: 0.41, cuda graph: True,"
        f" gen throughput (token/s): 1650.00, #queue-req: 0"
    )
    return JournalEntry(host=host, cursor=f"c{n}", timestamp=float(n), message=message)


class Bare(App[None]):
    def compose(self) -> ComposeResult:
        yield JournalView(2000)


@contextlib.asynccontextmanager
async def journal(width: int, height: int) -> AsyncIterator[tuple[Pilot[None], JournalView]]:
    """A journal view of 2000 lines alone on a screen, showing host `b300`."""
    async with Bare().run_test(size=(width, height)) as pilot:
        view = pilot.app.query_one(JournalView)
        view.show_host("b300")
        yield pilot, view


@pytest.fixture
def numbers_first_calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every line `numbers_first` is asked to reorder (once per line made into screen text)."""
    calls: list[str] = []
    real = journal_view.numbers_first

    def counting(message: str) -> str:
        calls.append(message)
        return real(message)

    monkeypatch.setattr(journal_view, "numbers_first", counting)
    return calls


def on_screen(view: JournalView) -> list[str]:
    """The view's rows as drawn (after control characters were replaced), top to bottom."""
    return [view.render_line(y).text.rstrip() for y in range(view.scrollable_content_region.height)]


async def test_a_flood_makes_text_only_for_the_lines_drawn(numbers_first_calls: list[str]) -> None:
    async with journal(100, 20) as (pilot, view):
        await pilot.pause()
        for start in range(0, 5000, 250):  # 5000 lines in 20 deliveries, one flush each
            view.add("b300", [decode(n) for n in range(start, start + 250)])
            view.flush()
        assert numbers_first_calls == []  # taken, capped and measured: no screen text made
        assert view.line_count == 2000 and "req-003000]" in view.lines[0]
        longest = max(len(decode(n).message) for n in range(3000, 5000))
        assert view.virtual_size.width == longest  # the horizontal scroll reaches its end

        numbers_first_calls.clear()  # (reading `view.lines` just now made two)
        await pilot.pause()
        rows = view.size.height  # (the row under the horizontal scrollbar is drawn too)
        drawn = on_screen(view)
        assert drawn[-1].startswith(
            "[2026-12-01 21:40:10 TP0 req-004999] Decode batch, accept len: 4.31, gen throughput"
        )
        assert 0 < len(numbers_first_calls) <= rows  # the newest lines, on screen, only
        assert {m[25:35] for m in numbers_first_calls} <= {
            f"req-{n:06d}" for n in range(4980, 5000)
        }

        # The full lines as shown: what `y` copies and `w` saves (made when read).
        assert view.lines[-1] == journal_view.display_line(decode(4999).message)


async def test_search_finds_a_line_off_screen_and_draws_it(
    numbers_first_calls: list[str],
) -> None:
    async with journal(100, 20) as (pilot, view):
        view.add("b300", [decode(n) for n in range(5000)])
        view.flush()
        await pilot.pause()
        assert "req-003000" not in "\n".join(on_screen(view))  # the oldest kept line
        made = len(numbers_first_calls)

        view.search("REQ-003000")  # smart case: lower case would too; upper is exact
        assert view.search_matches == []
        view.search("req-003000")
        assert view.search_matches == [0] and view.scroll_offset.y == 0 and view.paused
        assert len(numbers_first_calls) == made  # found in the raw rows
        await pilot.pause()
        rows = view.size.height  # (the row under the horizontal scrollbar is drawn too)
        assert made < len(numbers_first_calls) <= made + rows  # the lines drawn, only
        top = view.render_line(0)
        assert top.text.startswith("[2026-12-01 21:40:10 TP0 req-003000] Decode batch, accept")
        match_style = view.get_component_rich_style("journal-view--match")
        assert [s.text for s in top if s.style and s.style.bgcolor == match_style.bgcolor] == [
            "req-003000"
        ]  # highlighted where it was found
        assert view.current_line() == journal_view.display_line(decode(3000).message)

        # A term across a field boundary is looked for in the lines as shown (reordered).
        view.search("4.31, gen throughput")  # adjacent only once the numbers come first
        assert len(view.search_matches) == 2000
        view.search("4.31, accept rate")  # adjacent only in the raw line: not shown so
        assert view.search_matches == []
        view.search("")
        assert not view.paused


async def test_records_that_are_not_one_plain_line_are_made_into_text_when_they_arrive() -> None:
    async with journal(60, 12) as (pilot, view):
        entry: Any = JournalEntry
        view.add(
            "b300",
            [
                entry(host="b300", cursor="1", timestamp=1.0, message="tab\there"),
                entry(host="b300", cursor="2", timestamp=2.0, message="bell\x07 and\x0cfeed"),
                entry(host="b300", cursor="3", timestamp=3.0, message="宽字符" * 30),
                entry(
                    host="b300",
                    cursor="4",
                    timestamp=4.0,
                    message="Traceback (most recent call last):",
                    continuation=('  File "x.py", line 1', "RuntimeError: boom"),
                    new_invocation=True,
                    invocation="0123456789abcdef",
                ),
                entry(host="b300", cursor="5", timestamp=5.0, message=""),  # no line
            ],
        )
        view.flush()
        assert list(view.lines) == [
            "tab\there",
            "bell\x07 and",  # split where `str.splitlines` splits, as `Log` did
            "feed",
            "宽字符" * 30,
            "── service restarted: invocation 0123456789ab ──",
            "Traceback (most recent call last):",
            '  File "x.py", line 1',
            "RuntimeError: boom",
        ]
        assert view.virtual_size.width == 180  # the wide line, in cells
        await pilot.pause()
        drawn = on_screen(view)
        assert drawn[0] == "tab     here" and drawn[1] == "bell� and"  # never a raw control


async def test_the_merged_view_prefixes_raw_rows_when_drawn(
    numbers_first_calls: list[str],
) -> None:
    async with journal(140, 12) as (_, view):
        view.add("b300", [decode(1)])
        view.add("pro6000", [decode(2, "pro6000")])
        view.toggle_merged()
        view.add("b300", [decode(3)])
        view.flush()
        assert numbers_first_calls == []  # rows of both hosts, no screen text yet
        assert [line.split(" │ ")[0] for line in view.lines] == ["b300   ", "pro6000", "b300   "]
        assert view.lines[-1] == "b300    │ " + journal_view.display_line(decode(3).message)
        assert view.virtual_size.width == len(view.lines[-1])
        view.search("pro6000 │ [2026")  # the prefix is searched with the line
        assert view.search_matches == [1]
