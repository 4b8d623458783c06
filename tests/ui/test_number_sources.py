"""The fleet table marks numbers that did not come from the journal: `m` for the server's own
/metrics, `p` for Prometheus; the journal's are unmarked."""

from __future__ import annotations

from textual.app import App, ComposeResult

from widgets.host_table import HostTable


class TableApp(App[None]):
    def compose(self) -> ComposeResult:
        yield HostTable(["b300", "h200", "pro6000"], id="hosts")


async def test_each_number_says_where_it_came_from() -> None:
    app = TableApp()
    async with app.run_test(size=(110, 8)) as pilot:
        table = app.query_one(HostTable)
        table.set_metrics("b300", 4.39, 1564.0, graph=True)
        table.set_metrics("h200", 4.48, 1567.0, graph=True, source="/metrics")
        table.set_metrics("pro6000", 4.46, 1685.0, graph=True, source="prometheus")
        await pilot.pause()
        lines = [table.render_line(y).text.split() for y in range(1, 4)]
        assert lines[0][-3:] == ["4.39", "1564", "-"]
        assert lines[1][-4:] == ["4.48", "m", "1567", "-"]
        assert lines[2][-4:] == ["4.46", "p", "1685", "-"]
