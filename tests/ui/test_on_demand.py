"""`--follow on-demand` over 40 simulated hosts at 80×24: the rows on screen connect, the
others say `idle` and hold no connection; a page down opens the new page's hosts; an action
on idle hosts (`S`, a snapshot of every host) opens them, and they close again after it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot

from console.app import SpecopsApp
from console.fleet.fleet import Fleet
from console.hosts.profiles import load_fleet
from console.package.snapshot import HostOutcome
from console.sim.fleet import SimFleet
from console.transport.ssh import ConnState
from tests.stand_ins import FakeClock
from tests.ui.support import simulated_fleet, until
from widgets.host_table import HostTable
from widgets.journal_view import JournalView
from widgets.snapshot_panel import SnapshotPanel

HOSTS = 40
FEW_HOSTS = 12
"""Two pages at 80×24: enough for an action over every host to open idle ones, at a third of
the SSH handshakes (a snapshot of 40 hosts took minutes on one shared core)."""
IDLE_S = 1.0


@pytest.fixture
async def sim(tmp_path: Path) -> AsyncIterator[SimFleet]:
    async with simulated_fleet(tmp_path, hosts=HOSTS, decode_interval_s=2.0) as fleet:
        yield fleet


@pytest.fixture
async def few(tmp_path: Path) -> AsyncIterator[SimFleet]:
    async with simulated_fleet(tmp_path, hosts=FEW_HOSTS, decode_interval_s=2.0) as fleet:
        yield fleet


def connected_to(sim: SimFleet) -> set[str]:
    """The simulated hosts holding an SSH connection, as the hosts count them."""
    return {name for name, host in sim.hosts.items() if host.connections}


async def first_page_open(pilot: Pilot[Any], table: HostTable, sim: SimFleet) -> list[str]:
    """The rows on screen once the app has drawn them, after exactly their hosts connected."""
    await until(pilot, lambda: len(table.rows_on_screen()) > 5)
    page = table.rows_on_screen()
    await until(pilot, lambda: connected_to(sim) == set(page))
    return page


def words(table: HostTable) -> dict[str, str]:
    """Each drawn host row's connection word, by host (as an operator reads the table)."""
    shown: dict[str, str] = {}
    for y in range(1, table.size.height):
        cells = table.render_line(y).text.split()
        if len(cells) > 2 and cells[0] in table.rows_by_name:
            shown[cells[0]] = cells[1]
    return shown


def app_for(sim: SimFleet) -> SpecopsApp:
    """The app on demand, its idle close timed by a FakeClock the test advances."""
    clock = FakeClock()
    fleet = Fleet(load_fleet(sim.profiles_dir), on_demand=True, idle_close_s=IDLE_S, clock=clock)
    return SpecopsApp(fleet)


def once_idle_closes(app: SpecopsApp, predicate: Callable[[], object]) -> Callable[[], bool]:
    """`predicate`, checked after moving the fleet's clock past idle_close_s."""
    clock = app.fleet.clock
    assert isinstance(clock, FakeClock)

    def check() -> bool:
        clock.advance(IDLE_S)
        return bool(predicate())

    return check


async def test_rows_on_screen_connect_and_a_page_down_opens_the_next_page(sim: SimFleet) -> None:
    app = app_for(sim)
    async with app.run_test(size=(80, 24)) as pilot:
        table = app.query_one(HostTable)
        page = await first_page_open(pilot, table, sim)
        await until(pilot, lambda: set(words(table).values()) == {"connected"})
        assert set(words(table)) == set(page)  # (at 80 columns `#` is dropped: host first)
        off = [n for n in table.order if n not in page]
        assert all(table.rows_by_name[n].state.state is ConnState.IDLE for n in off)  # type: ignore[union-attr]

        await pilot.press("shift+tab")  # focus from the journal to the fleet table
        assert app.focused is table
        await pilot.press("pagedown")
        await pilot.pause()
        second = table.rows_on_screen()
        assert second and not set(second) & set(page)
        assert table.cursor_host == second[0]  # the cursor moved a page, as the view did
        await until(pilot, lambda: set(second) <= connected_to(sim))
        await until(pilot, lambda: set(words(table).values()) == {"connected"})
        # The first page closes once idle_close_s has passed.
        await until(pilot, once_idle_closes(app, lambda: connected_to(sim) == set(second)))
        assert all(table.rows_by_name[n].idle for n in page)
        await pilot.press("pageup")  # back: opened again
        assert table.cursor_host == page[0] and table.rows_on_screen() == page
        await until(pilot, lambda: set(page) <= connected_to(sim))
        await until(pilot, lambda: set(words(table).values()) == {"connected"})


async def test_listing_the_idle_hosts_does_not_open_them(sim: SimFleet) -> None:
    app = app_for(sim)
    async with app.run_test(size=(80, 24)) as pilot:
        table = app.query_one(HostTable)
        page = await first_page_open(pilot, table, sim)
        await pilot.press("F", *"state=idle", "enter")
        await until(pilot, lambda: table.host_filter.text == "state=idle")
        listed = table.rows_on_screen()
        assert listed and not set(listed) & set(page)
        # The first page, off screen now, closes and joins the list; the listed hosts stay
        # closed (long enough for them to have been opened, were they).
        await until(pilot, once_idle_closes(app, lambda: set(words(table).values()) == {"idle"}))
        await pilot.pause(0.5)
        assert not set(table.rows_on_screen()) & connected_to(sim)
        assert not set(listed) & connected_to(sim)
        view = app.query_one(JournalView)  # the selected idle host's journal says why it is quiet
        assert view.host == table.cursor_host
        assert "idle (closed on demand)" in str(view.border_title)

        await pilot.press("F", *["backspace"] * len("state=idle"), "enter")  # every host again
        await until(pilot, lambda: view.host in connected_to(sim))  # selected: opened
        await until(pilot, lambda: "idle" not in str(view.border_title))


async def test_an_action_on_idle_hosts_opens_them(few: SimFleet) -> None:
    sim = few
    app = app_for(sim)
    async with app.run_test(size=(80, 24)) as pilot:
        table = app.query_one(HostTable)
        page = await first_page_open(pilot, table, sim)
        last = table.order[-1]
        assert table.rows_by_name[last].idle, (table.rows_by_name[last].state, last)

        await pilot.press("S")  # a snapshot of every host
        panel = app.query_one(SnapshotPanel)
        await until(pilot, lambda: connected_to(sim) == set(sim.hosts), timeout=30)
        await until(pilot, lambda: not panel.running, timeout=60)
        assert panel.report is not None
        assert all(h.outcome is HostOutcome.OK for h in panel.report.hosts), panel.report.hosts
        # Done: the hosts nothing else wants close again.
        await until(pilot, once_idle_closes(app, lambda: connected_to(sim) == set(page)))
        assert table.rows_by_name[last].idle
