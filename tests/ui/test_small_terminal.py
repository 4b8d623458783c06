"""80×24 keeps what an operator reads (host, connection, health, accept, tok/s) and the
layout follows resizes both ways."""

from __future__ import annotations

from dataclasses import replace

from console.app import SpecopsApp
from tests.ui.scripted import ScriptedFleet, profiles
from widgets.host_table import HostTable
from widgets.journal_view import JournalView
from widgets.stats_panel import StatsPanel

KEPT = ["host", "connection", "health", "accept", "tok/s"]


async def test_80x24_keeps_the_numbers_and_resizes_follow_both_ways() -> None:
    app = SpecopsApp(ScriptedFleet(profiles()))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause(0.4)
        table, view, stats = (
            app.query_one(HostTable),
            app.query_one(JournalView),
            app.query_one(StatsPanel),
        )

        def header() -> str:
            return table.render_line(0).text

        def row(name: str) -> str:
            return table.render_line(table.rows_by_name[name].index).text

        assert all(c in table.shown_columns for c in KEPT)
        assert "nvls" not in table.shown_columns
        assert all(c in header() for c in KEPT) and "4.40" in row("b300") and "1655" in row("b300")
        assert table.virtual_size.width <= table.size.width  # nothing hidden off to the right
        assert not stats.display and view.size.height >= 10

        await pilot.resize_terminal(160, 48)
        await pilot.pause(0.3)
        assert "nvls" in table.shown_columns and "nvls" in header() and stats.display
        wide = view.size.height

        await pilot.resize_terminal(80, 24)
        await pilot.pause(0.3)
        assert "nvls" not in table.shown_columns and not stats.display
        assert 10 <= view.size.height < wide
        assert "1655" in row("b300")
        await pilot.press("q")


async def test_a_column_a_long_state_pushed_off_comes_back_once_it_is_gone() -> None:
    app = SpecopsApp(ScriptedFleet(profiles()))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause(0.4)
        table = app.query_one(HostTable)
        name = table.order[0]
        status = table.rows_by_name[name].status
        assert status is not None
        shown = table.shown_columns
        long = replace(status, active_state="deactivating", sub_state="stop-sigterm-waiting")
        table.set_status(long)
        await pilot.pause(0.1)
        assert len(table.shown_columns) < len(shown)  # the long state took their room
        table.set_status(status)
        await pilot.pause(1.5)  # the next freshness tick narrows the column again
        assert table.shown_columns == shown
        await pilot.press("q")
