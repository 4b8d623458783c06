"""After a snapshot the panel offers the findings report (`r`) and the bench view (`b`):
`r` writes REPORT.md into the package and the manifest still checks with `sha256sum -c`;
`b` shows the host's fetched bench files as matrices with their configurations, and `h` there
the files on the host as they are now."""

from __future__ import annotations

import asyncio
import io
from asyncio.subprocess import PIPE
from pathlib import Path

from rich.console import Console
from textual.widgets import Static

from console.app import SpecopsApp
from console.fleet.fleet import Fleet
from console.hosts.profiles import load_fleet
from tests.ui.support import all_connected, simulated_fleet, until
from widgets.bench_view import BenchScreen
from widgets.host_table import HostTable
from widgets.snapshot_panel import SnapshotPanel


def _text(renderable: object, width: int = 140) -> str:
    console = Console(width=width, record=True, file=io.StringIO())
    console.print(renderable)
    return console.export_text()


async def test_snapshot_then_r_writes_the_report_and_b_shows_the_bench_files(
    tmp_path: Path,
) -> None:
    async with simulated_fleet(tmp_path, hosts=1, decode_interval_s=0.1) as sim:
        app = SpecopsApp(Fleet(load_fleet(sim.profiles_dir)))
        package = tmp_path / "sim" / "package"
        async with app.run_test(size=(140, 44)) as pilot:
            table = app.query_one(HostTable)
            await all_connected(pilot, table)
            await pilot.press("s")
            panel = app.query_one(SnapshotPanel)
            await until(pilot, lambda: panel.report is not None)
            assert "r: write the findings report (REPORT.md)" in _text(panel.content)

            await pilot.press("r")
            await until(pilot, lambda: (package / "REPORT.md").exists())
            await app.workers.wait_for_complete()
            report = (package / "REPORT.md").read_text()
            assert "## b300 · SGLang" in report
            assert "(bench/results_b300/ddtree_b8_graph.json)" in report
            check = await asyncio.create_subprocess_exec(
                "sha256sum", "--strict", "-c", "MANIFEST.sha256", cwd=package, stdout=PIPE
            )
            stdout, _ = await check.communicate()
            assert check.returncode == 0, stdout
            assert b"REPORT.md: OK" in stdout

            await pilot.press("b")
            await until(pilot, lambda: isinstance(app.screen, BenchScreen))
            screen = app.screen
            body = _text(screen.query_one("#bench-body", Static).content)
            assert "ddtree_b8_graph" in body and "tok/s" in body
            assert "budget=8" in body and "cuda_graph=True" in body
            assert "results_b300" in _text(screen.query_one("#bench-title", Static).content)
            await pilot.press("a")
            await pilot.pause()
            assert "all hosts" in _text(screen.query_one("#bench-title", Static).content)

            # `h`: the host's files as they are now, one written after the snapshot among them.
            bench = sim.hosts["b300"].local("/root/bench_results_opt")
            (bench / "after_snapshot_b8.json").write_bytes(
                (bench / "ddtree_b8_graph.json").read_bytes()
            )
            assert not (package / "bench" / "results_b300" / "after_snapshot_b8.json").exists()
            await pilot.press("h")
            title = screen.query_one("#bench-title", Static)
            await until(pilot, lambda: "on the host now" in _text(title.content))
            body = _text(screen.query_one("#bench-body", Static).content)
            assert "after_snapshot_b8" in body and "ddtree_b8_graph" in body and "tok/s" in body
            await pilot.press("a")  # back to the package's files
            await pilot.pause()
            assert "on the host now" not in _text(title.content)
            await pilot.press("escape")
            await until(pilot, lambda: not isinstance(app.screen, BenchScreen))
