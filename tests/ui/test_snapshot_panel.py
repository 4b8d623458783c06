"""`s` snapshots the selected host, `S` all of them: a progress panel, then the summary."""

from __future__ import annotations

import asyncio
import io
from pathlib import Path

from rich.console import Console
from textual.message import Message

from console.app import SpecopsApp
from console.fleet.fleet import Fleet
from console.hosts.events import SnapshotStage
from console.sim.fleet import SimFleet
from console.sim.sglang import Timing
from console.transport.ssh import ConnState
from widgets.host_table import HostTable
from widgets.messages import SnapshotFinished, SnapshotProgressed
from widgets.snapshot_panel import SnapshotPanel


def shown(panel: SnapshotPanel) -> str:
    """The panel's text as it is drawn."""
    console = Console(width=110, record=True, file=io.StringIO())
    console.print(panel.content)
    return console.export_text()


def unwrapped(text: str) -> str:
    """The text with every space and line break taken out: what a line says, however the
    panel wrapped it (a test worker's longer tmp path wraps the package line)."""
    return "".join(text.split())


async def test_s_shows_progress_then_a_summary_and_S_snapshots_every_host(tmp_path: Path) -> None:
    sim = SimFleet(tmp_path / "sim", hosts=2, timing=Timing(load_s=0.3, decode_interval_s=0.1))
    profiles = await sim.start()
    messages: list[Message] = []
    app = SpecopsApp(Fleet(profiles))
    package = tmp_path / "sim" / "package"  # the demo profiles' artifacts.package
    try:
        async with app.run_test(size=(130, 44), message_hook=messages.append) as pilot:
            table = app.query_one(HostTable)
            for _ in range(200):
                await pilot.pause(0.05)
                rows = table.rows_by_name.values()
                if all(r.state and r.state.state is ConnState.CONNECTED for r in rows):
                    break
            panel = app.query_one(SnapshotPanel)
            assert not panel.display

            await pilot.press("2")  # pro6000, the second profile
            host = sim.hosts["pro6000"]
            host.freeze()  # the snapshot stalls on its first command, so progress is on screen
            await pilot.press("s")
            for _ in range(100):
                await pilot.pause(0.05)
                if "reading unit" in shown(panel):
                    break
            assert panel.display and panel.region.height > 2
            progress = shown(panel)
            assert "pro6000" in progress and "reading unit" in progress
            assert "b300" not in progress
            host.thaw()

            await app.workers.wait_for_complete()
            await pilot.pause(0.1)
            events = [m.event for m in messages if isinstance(m, SnapshotProgressed)]
            assert {e.host for e in events} == {"pro6000"}
            last = events[-1]
            assert last.stage is SnapshotStage.DONE
            assert last.files_done == last.files_total == 10
            assert last.bytes_done == last.bytes_total > 0
            (finished,) = [m for m in messages if isinstance(m, SnapshotFinished)]
            assert finished.report is not None and finished.report.ok
            summary = shown(panel)
            assert panel.border_title == "snapshot · done"
            assert "pro6000" in summary and " ok " in summary
            assert unwrapped(f"{package}: MANIFEST.sha256 updated, 11 files") in unwrapped(summary)
            assert len(list((package / "bench" / "results_pro6000").iterdir())) == 7

            await pilot.press("escape")
            await pilot.pause()
            assert not panel.display

            await pilot.press("S")
            await pilot.pause()
            assert panel.display
            await app.workers.wait_for_complete()
            await pilot.pause(0.1)
            summary = shown(panel)
            assert "b300" in summary and "pro6000" in summary
            assert "MANIFEST.sha256 updated" in summary
            assert (package / "bench" / "results_b300").is_dir()
            await pilot.press("q")
    finally:
        await asyncio.wait_for(sim.stop(), 10)
