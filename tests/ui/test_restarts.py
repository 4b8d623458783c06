"""A crash-looping host reads as one: restarts counted, `crash-loop` in red while it lasts,
and alert counts the operator can mark seen with `A`."""

from __future__ import annotations

import json
from pathlib import Path

from console.app import SpecopsApp
from console.fleet.fleet import Fleet
from console.hosts.profiles import load_fleet
from console.ledger import campaigns
from console.ledger.campaigns import Campaign, Cell
from console.sim.host import SimHost
from console.transport.host_files import STATE_ROOT
from tests.ui.support import simulated_fleet, until
from widgets.alerts import AlertsScreen
from widgets.fleet_rows import COLUMNS
from widgets.host_table import HostTable

UNIT = "sglang-k26-ddtree.service"


def log(host: SimHost, message: str, invocation: str) -> None:
    host.journal.append(
        UNIT,
        message,
        _PID="777",
        SYSLOG_IDENTIFIER="python3",
        _SYSTEMD_INVOCATION_ID=invocation,
    )


def crash_run(host: SimHost, n: int) -> None:
    """One run of a cuBLAS loop: it starts, logs ready, then dies."""
    run = f"{n:032x}"
    log(host, "[2026-12-01 12:00:00] The server is fired up and ready to roll!", run)
    log(host, "[2026-12-01 12:00:01 TP0] RuntimeError: CUBLAS_STATUS_EXECUTION_FAILED", run)


def cell(table: HostTable, name: str, column: str) -> str:
    value = table._cells_by_name[name][COLUMNS.index(column)]
    return value if isinstance(value, str) else value.plain


async def test_a_crash_loop_stays_red_counts_restarts_and_alerts_can_be_seen(
    tmp_path: Path,
) -> None:
    async with simulated_fleet(tmp_path, hosts=1, decode_interval_s=3600) as sim:
        app = SpecopsApp(Fleet(load_fleet(sim.profiles_dir)))
        async with app.run_test(size=(150, 40)) as pilot:
            host = sim.hosts["b300"]
            table = app.query_one(HostTable)
            row = table.rows_by_name["b300"]
            monitor = app.fleet.monitors["b300"]
            await until(pilot, lambda: monitor.metrics.invocation_id == host.unit.invocation_id)
            for n in range(1, 4):
                crash_run(host, n)
                await until(pilot, lambda: row.alerts == n)  # noqa: B023 (awaited at once)
            await until(pilot, lambda: row.looping)
            assert cell(table, "b300", "restarts") == "3"
            assert cell(table, "b300", "unit") == "crash-loop"
            assert table.has_class("-crashed")
            # The last run logged ready after its predecessors died: still a loop, still red.
            log(host, "[2026-12-01 12:00:09] The server is fired up and ready to roll!", "f" * 32)
            await pilot.pause(1.2)
            assert row.looping and table.has_class("-crashed")
            assert cell(table, "b300", "alerts") == "3"
            await pilot.press("A")
            await until(pilot, lambda: isinstance(app.screen, AlertsScreen))
            assert cell(table, "b300", "alerts") == "3 ✓"  # seen: counted, no longer new
            await pilot.press("escape")
            crash_run(host, 9)
            await until(pilot, lambda: cell(table, "b300", "alerts") == "1")  # one new since
            await pilot.press("q")


async def test_a_host_under_a_tuning_campaign_reads_campaign_not_trouble(tmp_path: Path) -> None:
    """A campaign (`specops sweep`, from any console) restarts the server every cell: the
    table says `campaign` in the unit column, and drops it when the record says it ended."""
    async with simulated_fleet(tmp_path, hosts=1, decode_interval_s=3600) as sim:
        host = sim.hosts["b300"]
        running = Campaign(
            id=campaigns.new_id(), host="b300", unit=UNIT, grid={"budget": [4, 6]}, start={},
            cells=[Cell({"budget": 4}, "measured"), Cell({"budget": 6})],
        )  # fmt: skip
        record = host.local(campaigns.campaign_path(UNIT, running.id, STATE_ROOT))
        record.parent.mkdir(parents=True, exist_ok=True)
        record.write_text(json.dumps(running.record()))
        app = SpecopsApp(Fleet(load_fleet(sim.profiles_dir)))
        async with app.run_test(size=(150, 40)) as pilot:
            table = app.query_one(HostTable)
            row = table.rows_by_name["b300"]
            await until(pilot, lambda: row.campaign is not None)
            assert row.campaign == f"campaign {running.id}: 1/2 cells"
            assert cell(table, "b300", "unit") == "campaign"
            running.state = "finished"
            record.write_text(json.dumps(running.record()))
            crash_run(host, 1)  # the campaign's last restart (any restart reads it again)
            await until(pilot, lambda: row.campaign is None)
            assert cell(table, "b300", "unit") != "campaign"
