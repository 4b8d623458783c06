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


async def test_a_snapshot_that_ends_behind_the_help_screen_is_shown_when_it_closes(
    tmp_path: Path,
) -> None:
    """The panel is the main screen's: a snapshot that ends behind a modal is shown on it,
    and one that ends as the app closes (a one-core CI run: `NoMatches` on the torn-down
    screen) is dropped quietly."""
    from tests.ui.support import all_connected, until
    from widgets.help_screen import HelpScreen

    sim = SimFleet(tmp_path / "sim", hosts=1, timing=Timing(load_s=0.3, decode_interval_s=0.1))
    profiles = await sim.start()
    app = SpecopsApp(Fleet(profiles))
    try:
        async with app.run_test(size=(130, 44)) as pilot:
            table = app.query_one(HostTable)
            await all_connected(pilot, table)
            host = sim.hosts["b300"]
            host.freeze()  # the snapshot waits while the help screen opens
            await pilot.press("s")
            panel = app.query_one(SnapshotPanel)
            await until(pilot, lambda: panel.running)
            await pilot.press("question_mark")
            await until(pilot, lambda: isinstance(app.screen, HelpScreen))
            await pilot.press("s")  # another snapshot from the help screen: none, no crash
            host.thaw()
            await until(pilot, lambda: not panel.running, timeout=30)
            await pilot.press("escape")
            await until(pilot, lambda: not isinstance(app.screen, HelpScreen))
            assert app.is_running and "package" in unwrapped(shown(panel))
            await pilot.press("q")
        app._snapshot_finished(SnapshotFinished(None, "ended as the app closed"))  # torn down
    finally:
        await sim.stop()
