"""The GPUs in the TUI (issue 33): the fleet table's `gpu` column (fullest memory, mean
utilization, `↓` when a card is held down), `u` for each GPU with its history, and a host
without nvidia-smi that says so once instead of failing every poll."""

from __future__ import annotations

from pathlib import Path

from console.app import SpecopsApp
from console.fleet.fleet import Fleet
from console.hosts.profiles import load_fleet
from console.sim.fleet import REFERENCE_GPU
from console.sim.gpus import HEAVY, xid_line
from tests.integration.test_gpus import ILLEGAL
from tests.stand_ins import FakeClock
from tests.ui.support import simulated_fleet, ticking, until
from tests.ui.test_health import cell
from widgets.alerts import AlertsScreen
from widgets.gpu_view import GpuScreen
from widgets.host_table import HostTable


def nvidia_smi_runs(commands: list[str]) -> int:
    return sum("nvidia-smi" in c for c in commands)


async def test_the_gpu_column_the_u_screen_and_a_host_without_the_tool(tmp_path: Path) -> None:
    clock = FakeClock()
    async with simulated_fleet(tmp_path, hosts=2, decode_interval_s=0.3) as sim:
        sim.hosts["b300"].gpus = [REFERENCE_GPU] * 4  # pro6000 has no nvidia-smi
        app = SpecopsApp(Fleet(load_fleet(sim.profiles_dir), clock=clock))
        async with app.run_test(size=(160, 48)) as pilot:
            table = app.query_one(HostTable)
            b300, pro6000 = table.rows_by_name["b300"], table.rows_by_name["pro6000"]
            unit = sim.hosts["b300"].unit
            await until(pilot, lambda: unit.server is not None and unit.server.ready)
            # Under load first, in real time: ticking while the simulated requests ramp up
            # moved the fleet's clock past pro6000's thirty intervals on a loaded machine.
            await until(pilot, lambda: unit.server.gpu_load.running >= HEAVY)  # type: ignore[union-attr]
            # Read every `[gpu] interval_s` of the fleet's clock: move it on between looks.
            await until(
                pilot, ticking(clock, lambda: b300.gpus and b300.gpus[0].util_pct == 100, 5)
            )
            shown = cell(table, "b300", "gpu")
            assert shown == "70/80G 100%↓", shown  # at its power cap, as the real card
            assert cell(table, "pro6000", "gpu") == "-"

            await pilot.press("u")
            await until(pilot, lambda: isinstance(app.screen, GpuScreen))
            text = str(app.screen.query_one("#gpu-lines").render())
            assert text.count("70.1/80 GiB") == 4 and text.count("sw_power_cap") == 4
            title = str(app.screen.query_one("#gpu-title").render())
            assert "4× NVIDIA H100 80GB HBM3: fullest 70/80 GiB, util 100%" in title
            assert "sw_power_cap on all" in title
            await pilot.press("escape")
            await until(pilot, lambda: not isinstance(app.screen, GpuScreen))

            await pilot.press("tab")  # the next host
            await until(pilot, lambda: app.selected_host == "pro6000")
            await pilot.press("u")
            await until(pilot, lambda: isinstance(app.screen, GpuScreen))
            said = str(app.screen.query_one("#gpu-lines").render())
            assert said.startswith("no GPU tool") and "nvidia-smi" in said
            await pilot.press("escape")
            # Asked once, then only every thirty intervals: not an error per poll, nor on
            # every dialog that closes over its row (which wakes the poll: the Xids alone).
            for _ in range(10):
                clock.advance(10)
                await pilot.pause(0.05)
            await pilot.press("u")
            await until(pilot, lambda: isinstance(app.screen, GpuScreen))
            await pilot.press("escape")
            await until(pilot, lambda: not isinstance(app.screen, GpuScreen))
            await pilot.pause(0.2)
            assert nvidia_smi_runs(sim.hosts["pro6000"].commands) == 1
            assert nvidia_smi_runs(sim.hosts["b300"].commands) > 1
            assert pro6000.gpus == ()
            await pilot.press("q")


async def test_an_xid_at_a_crash_is_notified_with_it_and_listed_under_A(tmp_path: Path) -> None:
    async with simulated_fleet(tmp_path, hosts=1, decode_interval_s=0.3) as sim:
        host = sim.hosts["b300"]
        host.gpus = [REFERENCE_GPU] * 2
        app = SpecopsApp(Fleet(load_fleet(sim.profiles_dir)))
        notes: list[tuple[str, str]] = []
        async with app.run_test(size=(160, 48)) as pilot:
            app.notify = lambda message, title="", **kw: notes.append((title, str(message)))  # type: ignore[method-assign]
            unit = host.unit
            await until(pilot, lambda: unit.server is not None and unit.server.ready)
            # Following live (a line logged before the follower's first read is history, no
            # alert): its first follow started.
            await until(pilot, lambda: app.fleet.followers["b300"].restarts >= 1)
            host.journal.kernel(xid_line(0, unit.main_pid))  # as the driver logs it
            host.journal.append(unit.name, ILLEGAL)
            titles = ("b300: GPU driver error", "crash on b300")
            await until(pilot, lambda: {t for t, _ in notes} >= set(titles))
            (xid,) = [m for t, m in notes if t == titles[0]]
            assert xid.startswith("Xid 31 on GPU 0 at ") and "(python3, pid " in xid
            # Tied in whichever comes second: the crash's alert waits for the unit's flags,
            # the Xid's read is woken by the crash line; either may arrive first.
            (crash,) = [m for t, m in notes if t == titles[1]]
            assert xid.endswith("at the crash: illegal_memory_access") or (
                "illegal_memory_access" in crash and "Xid 31 on GPU 0 at " in crash
            )
            await pilot.press("A")
            await until(pilot, lambda: isinstance(app.screen, AlertsScreen))
            listed = str(app.screen.query_one("#alert-xids").render())
            assert listed.startswith("b300: Xid 31 on GPU 0")
            detail = str(app.screen.query_one("#alert-detail").render())
            assert "illegal_memory_access" in detail and "Xid 31 on GPU 0" in detail
            await pilot.press("escape", "q")
