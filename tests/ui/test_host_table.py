"""The fleet table on its own: cursor keys, clicks, scrolling a long fleet, live numbers."""

from __future__ import annotations

import pytest
from textual.app import App, ComposeResult

from console.fleet.filter import parse_filter
from console.hosts.events import ServiceStatus
from console.transport.ssh import ConnState, HostState
from widgets.host_table import HostTable

HOSTS = [f"gpu{n:02d}" for n in range(1, 21)]


class TableApp(App[None]):
    def __init__(self) -> None:
        super().__init__()
        self.highlighted: list[tuple[str, int]] = []

    def compose(self) -> ComposeResult:
        yield HostTable(HOSTS, id="hosts")

    def on_host_table_row_highlighted(self, message: HostTable.RowHighlighted) -> None:
        self.highlighted.append((message.host, message.cursor_row))


def screen_lines(app: App[None]) -> list[str]:
    table = app.query_one(HostTable)
    return [table.render_line(y).text for y in range(table.size.height)]


async def test_keys_move_the_cursor_and_name_the_host() -> None:
    app = TableApp()
    async with app.run_test(size=(100, 12)) as pilot:
        table = app.query_one(HostTable)
        table.focus()
        await pilot.press("down", "down", "up")
        assert table.cursor_row == 1
        assert app.highlighted == [("gpu01", 0), ("gpu02", 1), ("gpu03", 2), ("gpu02", 1)]
        await pilot.press("end")
        assert app.highlighted[-1] == ("gpu20", 19)
        await pilot.press("down")  # already on the last host: nothing happens
        assert len(app.highlighted) == 5


async def test_a_long_fleet_scrolls_under_a_fixed_header() -> None:
    app = TableApp()
    async with app.run_test(size=(100, 12)) as pilot:
        table = app.query_one(HostTable)
        assert table.size.height == 12  # header + 11 hosts (max-height), the rest scroll
        table.move_cursor(row=15)
        await pilot.pause()
        lines = screen_lines(app)
        assert lines[0].split()[:3] == ["#", "host", "connection"]
        assert any(line.split()[:2] == ["16", "gpu16"] for line in lines[1:])
        table.move_cursor(row=0)
        await pilot.pause()
        assert screen_lines(app)[1].split()[:2] == ["1", "gpu01"]


async def test_a_click_selects_the_host_under_the_pointer() -> None:
    app = TableApp()
    async with app.run_test(size=(100, 12)) as pilot:
        await pilot.click(HostTable, offset=(5, 4))  # line 4: the fourth host
        assert app.highlighted[-1] == ("gpu04", 3)
        await pilot.click(HostTable, offset=(5, 0))  # the header selects nothing
        assert app.highlighted[-1] == ("gpu04", 3)


async def test_new_numbers_redraw_the_row_and_widen_its_column() -> None:
    app = TableApp()
    async with app.run_test(size=(130, 12)) as pilot:
        table = app.query_one(HostTable)
        before = screen_lines(app)[2]
        assert before.split()[-6:] == ["-", "-", "-", "-", "-", "-"]
        table.set_metrics("gpu02", 4.8, 1650.0, graph=True)
        await pilot.pause()
        # then gpu, age, restarts, alerts, release
        assert screen_lines(app)[2].split()[-7:-4] == ["4.80", "1650", "-"]
        table.set_metrics("gpu02", 4.8, 123456789.0)  # wider than the `tok/s` header
        await pilot.pause()
        lines = screen_lines(app)
        assert "123456789" in lines[2]
        header = lines[0]
        assert header.index("alerts") > lines[2].index("123456789") + len("123456789")


async def test_each_row_names_the_hosts_sglang_release() -> None:
    app = TableApp()
    async with app.run_test(size=(130, 12)) as pilot:  # every column beside the scrollbar
        table = app.query_one(HostTable)
        table.set_status(
            ServiceStatus(host="gpu01", active_state="active", sglang_version="0.5.23")
        )
        table.set_status(ServiceStatus(host="gpu02", active_state="active"))
        await pilot.pause()
        lines = screen_lines(app)
        header = lines[0].split()
        column = header.index("sglang")
        assert lines[1].split()[column] == "0.5.23"
        assert lines[2].split()[column] == "-"


async def test_a_scrolled_table_repaints_the_row_that_changed() -> None:
    app = TableApp()
    async with app.run_test(size=(100, 12)) as pilot:
        table = app.query_one(HostTable)
        table.move_cursor(row=15)  # scrolled: gpu16 is the last line on screen
        await pilot.pause()
        y = next(i for i, line in enumerate(screen_lines(app)) if "gpu16" in line)
        drawn: list[int] = []
        render_line = table.render_line

        def recording(line: int) -> object:
            drawn.append(line)
            return render_line(line)

        table.render_line = recording  # type: ignore[assignment,method-assign]
        table.set_state(HostState("gpu16", ConnState.CLOSED))  # no wider: no full redraw
        await pilot.pause()
        assert y in drawn  # the screen asked for the changed row again, not another line
        assert "closed" in screen_lines(app)[y]


@pytest.mark.parametrize("width", [80, 78])
async def test_columns_that_do_not_fit_beside_the_scrollbar_are_dropped_not_cut(
    width: int,
) -> None:
    app = TableApp()
    async with app.run_test(size=(width, 12)) as pilot:
        table = app.query_one(HostTable)
        await pilot.pause()
        unfiltered = table.shown_columns
        table.set_filter(parse_filter("gpu"))  # every host: `host 20/20`, still scrolling
        await pilot.pause()
        header = screen_lines(app)[0]
        last = table.shown_columns[-1]
        assert header.rstrip().endswith(last)  # drawn whole, not cut by the scrollbar
        assert not table.show_horizontal_scrollbar  # which would take one of its rows
        table.set_filter(parse_filter(""))
        await pilot.pause()
        assert table.shown_columns == unfiltered  # the count's width went with the filter
