"""Health and freshness in the fleet table: a 503 and a stalled scheduler never look fine."""

from __future__ import annotations

from pathlib import Path

from textual.pilot import Pilot

from console.app import SpecopsApp
from console.fleet.fleet import Fleet
from console.hosts.profiles import load_fleet
from console.sim.host import SimHost
from tests.stand_ins import FakeClock
from tests.ui.support import simulated_fleet, ticking, until
from widgets.fleet_rows import COLUMNS
from widgets.host_table import HostTable


def row_text(table: HostTable, name: str) -> str:
    """The host's line as it is drawn."""
    return table.render_line(table.rows_by_name[name].index).text


def cell(table: HostTable, name: str, column: str) -> str:
    cells = table._cells_by_name[name]
    value = cells[COLUMNS.index(column)]
    return value if isinstance(value, str) else value.plain


async def serving(pilot: Pilot[int], app: SpecopsApp, host: SimHost) -> None:
    table = app.query_one(HostTable)
    row = table.rows_by_name[host.name]
    await until(pilot, lambda: host.unit.server is not None and host.unit.server.ready)
    await until(pilot, lambda: row.health == "ok" and row.accept_len is not None)


async def test_a_503_shows_in_the_health_column_and_recovers(tmp_path: Path) -> None:
    async with simulated_fleet(tmp_path, hosts=2, decode_interval_s=0.3) as sim:
        app = SpecopsApp(Fleet(load_fleet(sim.profiles_dir), health_s=0.3))
        async with app.run_test(size=(150, 40)) as pilot:
            sick = sim.hosts["pro6000"]
            await serving(pilot, app, sick)
            table = app.query_one(HostTable)
            assert sick.unit.server is not None
            sick.unit.server.unhealthy = True
            await until(pilot, lambda: table.rows_by_name["pro6000"].health == "503")
            assert " 503 " in row_text(table, "pro6000")
            # systemd alone says fine (its status poll may come a moment after /health's)
            await until(pilot, lambda: "active/running" in row_text(table, "pro6000"))
            assert cell(table, "b300", "health") == "ok"
            sick.unit.server.unhealthy = False
            await until(pilot, lambda: table.rows_by_name["pro6000"].health == "ok")
            await pilot.press("q")


def seconds(age: str) -> int:
    """The age column's `45s` or `3m00`, in seconds."""
    minutes, _, rest = age.rpartition("m")
    return int(minutes or 0) * 60 + int(rest.rstrip("s"))


async def test_a_stalled_scheduler_greys_its_numbers_and_ages_in_yellow(tmp_path: Path) -> None:
    clock = FakeClock()
    async with simulated_fleet(tmp_path, hosts=1, decode_interval_s=0.3) as sim:
        app = SpecopsApp(Fleet(load_fleet(sim.profiles_dir), health_s=0.5, clock=clock))
        async with app.run_test(size=(150, 40)) as pilot:
            host = sim.hosts["b300"]
            table = app.query_one(HostTable)
            row = table.rows_by_name["b300"]
            await until(pilot, lambda: host.unit.server is not None and host.unit.server.ready)
            # /health is asked every health_s of the fleet's clock: move it on between looks.
            await until(pilot, ticking(clock, lambda: row.health == "ok" and row.accept_len))
            await until(pilot, lambda: row.age_s is not None)
            assert not row.stale and cell(table, "b300", "age").endswith("s")
            live = table._cells_by_name["b300"][COLUMNS.index("accept")]
            assert isinstance(live, str)  # drawn in the row's own colour
            assert host.unit.server is not None
            host.unit.server.stalled = True

            def stale_after_ten_more_seconds() -> bool:
                # Our clock moves on, the host logs nothing more: once a line still in flight
                # has landed, the numbers are ten seconds older at each look.
                clock.advance(10)
                return row.stale

            await until(pilot, stale_after_ten_more_seconds)
            accept = table._cells_by_name["b300"][COLUMNS.index("accept")]
            tps = table._cells_by_name["b300"][COLUMNS.index("tok/s")]
            age = table._cells_by_name["b300"][COLUMNS.index("age")]
            grey = table.get_component_rich_style("host-table--stale", partial=True)
            assert not isinstance(accept, str) and accept.style == grey
            assert not isinstance(tps, str) and tps.style == grey
            assert not isinstance(age, str) and "yellow" in str(age.style)
            assert seconds(age.plain) >= 5
            assert row.accept_len is not None and f"{row.accept_len:.2f}" in row_text(table, "b300")
            host.unit.server.stalled = False
            await until(pilot, lambda: not row.stale, timeout=5)
            await pilot.press("q")
