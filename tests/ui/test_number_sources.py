"""The fleet table marks numbers that did not come from the journal: `m` for the server's own
/metrics, `p` for Prometheus; the journal's are unmarked."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from textual.app import App, ComposeResult

from console.app import SpecopsApp
from console.fleet.fleet import Fleet
from console.hosts.events import MetricsUpdated
from console.hosts.profiles import load_fleet
from tests.ui.support import simulated_fleet, until
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
        lines = [" ".join(table.render_line(y).text.split()) for y in range(1, 4)]
        assert "4.39 1564" in lines[0]  # the journal's: unmarked
        assert "4.48 m 1567" in lines[1]
        assert "4.46 p 1685" in lines[2]


async def test_the_app_shows_server_numbers_when_there_is_no_journal(tmp_path: Path) -> None:
    async with simulated_fleet(tmp_path, hosts=1, decode_interval_s=0.1) as sim:
        fleet = Fleet(load_fleet(sim.profiles_dir), follow=False, server_metrics_s=0.3)
        app = SpecopsApp(fleet)
        async with app.run_test(size=(150, 45)) as pilot:
            row = app.query_one(HostTable).rows_by_name["b300"]
            await until(pilot, lambda: row.accept_len is not None)
            assert row.source == "/metrics"
            assert row.accept_len is not None and 4.3 <= row.accept_len <= 4.5
            assert row.graph is True


async def test_the_journals_numbers_keep_the_table_while_they_are_fresh(tmp_path: Path) -> None:
    """The journal stops delivering for a few seconds (its followers held back): the row keeps
    the journal's numbers rather than flipping to /metrics, which keeps arriving."""
    async with simulated_fleet(tmp_path, hosts=1, decode_interval_s=0.1) as sim:
        fleet = Fleet(load_fleet(sim.profiles_dir), server_metrics_s=0.2)
        sources: list[str] = []

        def listen(event: object) -> None:
            if isinstance(event, MetricsUpdated):
                sources.append(event.source)

        fleet.listen(listen)
        app = SpecopsApp(fleet)
        async with app.run_test(size=(150, 45)) as pilot:
            table = app.query_one(HostTable)
            shown: list[str] = []  # the source of each number the table took, in order
            set_metrics = table.set_metrics

            def record(*args: Any, **kwargs: Any) -> None:
                shown.append(kwargs.get("source", "journal"))
                set_metrics(*args, **kwargs)

            table.set_metrics = record  # type: ignore[method-assign]
            await until(pilot, lambda: "journal" in shown)
            fleet.pressure = lambda: True  # the followers stop reading the journal
            await pilot.pause(0.5)
            before = sources.count("/metrics")
            await until(pilot, lambda: sources.count("/metrics") >= before + 4)
            assert "/metrics" not in shown
