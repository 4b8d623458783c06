"""More hosts than fit on screen: the accept-length chart draws the hosts whose rows the fleet
table shows, in the table's order, so the table and the journal keep their room (with a line
per host, 200 hosts filled the whole screen with the chart); a scrolled table keeps every row
on screen live."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot

from console.app import SpecopsApp
from console.fleet.fleet import Fleet
from console.hosts.profiles import load_fleet
from console.sim.fleet import SimFleet
from tests.ui.support import simulated_fleet, until
from widgets.accept_chart import AcceptChart
from widgets.host_table import HostTable
from widgets.journal_view import JournalView, PromptInput

HOSTS = 16


@pytest.fixture
async def sim(tmp_path: Path) -> AsyncIterator[SimFleet]:
    async with simulated_fleet(tmp_path, hosts=HOSTS, decode_interval_s=0.2) as fleet:
        yield fleet


def drawn(app: SpecopsApp) -> list[str]:
    """The screen's lines as the terminal was last sent them (cached lines included)."""
    return [strip.text for strip in app.screen._compositor.render_strips()]


def chart_names(chart: AcceptChart) -> list[str]:
    """The host named on each line of the chart, as drawn."""
    lines = [chart.render_line(y).text.split() for y in range(len(chart.shown))]
    return [words[0] for words in lines if words]


async def charted(app: SpecopsApp, pilot: Pilot[Any]) -> tuple[HostTable, AcceptChart, JournalView]:
    """The table, chart and journal once every host has an accept length and the chart has
    followed the table (it does at least once a second)."""
    table, chart = app.query_one(HostTable), app.query_one(AcceptChart)
    await until(pilot, lambda: all(r.accept_len for r in table.rows_by_name.values()))
    await pilot.pause(1.2)
    return table, chart, app.query_one(JournalView)


async def test_the_chart_draws_the_hosts_on_screen_in_the_tables_order(
    sim: SimFleet,
) -> None:
    app = SpecopsApp(Fleet(load_fleet(sim.profiles_dir), history=0))
    async with app.run_test(size=(160, 48)) as pilot:
        table, chart, journal = await charted(app, pilot)
        on_screen = table.rows_on_screen()
        assert len(on_screen) < HOSTS  # more hosts than the table shows
        assert chart_names(chart) == on_screen
        assert chart.region.height == len(on_screen) + 2  # its border, no more
        assert journal.region.height >= 15  # the journal keeps its room at 160×48
        assert all(chart.values[name] for name in on_screen)  # every shown line has bars

        for _ in range(HOSTS - 1):  # to the last host: the table scrolls, the chart with it
            await pilot.press("tab")
        last = table.names[-1]
        assert table.cursor_host == last
        await until(pilot, lambda: chart_names(chart) == table.rows_on_screen())
        assert last in chart_names(chart) and last not in on_screen
        assert chart.selected == last

        await pilot.press("F")  # a filter leaves fewer hosts: the chart shrinks with it
        prompt = app.query_one("#fleet-filter", PromptInput)
        prompt.value = "name=b300 name=pro6000"
        await pilot.press("enter")
        await until(pilot, lambda: sorted(chart_names(chart)) == ["b300", "pro6000"])
        assert chart.region.height == 2 + 2


async def test_rows_scrolled_into_view_keep_their_numbers_live(sim: SimFleet) -> None:
    app = SpecopsApp(Fleet(load_fleet(sim.profiles_dir), history=0))
    async with app.run_test(size=(160, 48)) as pilot:
        table = app.query_one(HostTable)
        await until(pilot, lambda: all(r.accept_len for r in table.rows_by_name.values()))
        for _ in range(HOSTS - 1):  # the last host: the table scrolls to the bottom
            await pilot.press("tab")
        assert table.scroll_offset.y > 0
        bottom = table.rows_on_screen()[-3:]

        def shown_accept(name: str) -> str:
            lines = drawn(app)
            column = next(t for t in lines if " host " in t).split().index("accept")
            return next(t for t in lines if f" {name} " in t).split()[column]

        def live() -> bool:
            return all(shown_accept(n) == f"{table.rows_by_name[n].accept_len:.2f}" for n in bottom)

        # Decode lines arrive every 0.2 s: each row changes several times; what the screen
        # shows must follow them (it kept a bottom row's first numbers before).
        changes = {n: {shown_accept(n)} for n in bottom}
        for _ in range(20):
            await pilot.pause(0.25)
            await until(pilot, live, timeout=2)
            for name in bottom:
                changes[name].add(shown_accept(name))
        assert all(len(seen) > 2 for seen in changes.values())


async def test_at_80x24_the_journal_keeps_its_room_and_the_chart_follows_the_cursor(
    sim: SimFleet,
) -> None:
    app = SpecopsApp(Fleet(load_fleet(sim.profiles_dir), history=0))
    async with app.run_test(size=(80, 24)) as pilot:
        table, chart, journal = await charted(app, pilot)
        assert len(chart_names(chart)) == 3 and chart.region.height == 5
        assert journal.region.height >= 8  # ten chart lines left it none
        for _ in range(5):  # past the chart's three lines: it follows the selected host
            await pilot.press("tab")
        await until(pilot, lambda: table.cursor_host in chart_names(chart))
        on_screen, cursor = table.rows_on_screen(), table.cursor_host
        assert cursor is not None
        at = on_screen.index(cursor)
        assert chart_names(chart) == on_screen[at - 2 : at + 1]  # the cursor's, and before

        await pilot.resize_terminal(160, 48)  # roomy again: as many as the table shows
        await until(pilot, lambda: chart_names(chart) == table.rows_on_screen())


async def test_page_keys_move_through_the_fleet_a_page_at_a_time(sim: SimFleet) -> None:
    app = SpecopsApp(Fleet(load_fleet(sim.profiles_dir), history=0))
    async with app.run_test(size=(80, 24)) as pilot:
        table = app.query_one(HostTable)
        await until(pilot, lambda: len(table.rows_on_screen()) > 3)
        await pilot.press("shift+tab")  # from the journal to the fleet table
        assert app.focused is table
        for grouped in (False, True):  # grouped: a group's line takes a row of the page
            if grouped:
                await pilot.press("g")
            seen = list(table.rows_on_screen())
            while table.cursor_host != table.names[-1]:
                before = table.rows_on_screen()
                await pilot.press("pagedown")
                shown = table.rows_on_screen()
                assert table.cursor_host in shown
                assert shown != before or table.cursor_host == table.names[-1]  # the end
                seen += [name for name in shown if name not in seen]
                assert len(seen) <= HOSTS
            assert seen == table.names  # every host shown once on the way, none skipped
            pages = 0
            while table.cursor_host != table.names[0]:
                await pilot.press("pageup")
                assert table.cursor_host in table.rows_on_screen()
                pages += 1
                assert pages <= HOSTS
            assert table.rows_on_screen()[0] == table.names[0]
