"""The app starts on the simulated fleet and shows every host connected, with live lines."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

from textual.message import Message

from console.app import SpecopsApp
from console.fleet.fleet import Fleet
from console.sim.fleet import SimFleet
from console.sim.sglang import Timing
from console.transport.ssh import ConnState
from widgets.host_table import HostTable
from widgets.journal_view import JournalView
from widgets.messages import HostStateUpdated
from widgets.stats_panel import StatsPanel


async def test_app_shows_every_host_connected_with_journal_lines(tmp_path: Path) -> None:
    sim = SimFleet(tmp_path / "sim", hosts=3, timing=Timing(load_s=0.3, decode_interval_s=0.1))
    profiles = await sim.start()
    messages: list[Message] = []
    skipped = "skipped: hosts.ini: host 'gpu-b': ansible_ssh_private_key_file = 'x.pem': …"
    app = SpecopsApp(Fleet(profiles), notes=[skipped])  # an inventory host it could not use
    try:
        async with app.run_test(size=(120, 36), message_hook=messages.append) as pilot:
            assert [n.message for n in app._notifications] == [skipped]  # said on screen too
            table = app.query_one(HostTable)
            for _ in range(100):
                await pilot.pause(0.05)
                rows = table.rows_by_name.values()
                if all(r.state and r.state.state is ConnState.CONNECTED for r in rows):
                    break
            assert {r.name for r in table.rows_by_name.values()} == {"b300", "pro6000", "h200"}
            assert all(
                r.state is not None and r.state.state is ConnState.CONNECTED
                for r in table.rows_by_name.values()
            )
            connected = {
                m.event.host
                for m in messages
                if isinstance(m, HostStateUpdated) and m.event.state.state is ConnState.CONNECTED
            }
            assert connected == {"b300", "pro6000", "h200"}
            journal = app.query_one(JournalView)
            for _ in range(100):
                await pilot.pause(0.05)
                if any("Decode batch" in line for line in journal.lines):
                    break
            assert journal.host == "b300"
            assert any("Decode batch" in line for line in journal.lines)
            stats = app.query_one(StatsPanel)  # the KV cache's share from the decode lines
            for _ in range(100):
                await pilot.pause(0.05)
                if "KV cache" in str(stats.border_title):
                    break
            assert re.fullmatch(r"stats · b300 · KV cache \d+% used", str(stats.border_title))
            await pilot.press("2")
            await pilot.pause(0.1)
            second = app.host_names[1]  # profiles are in file-name order
            assert journal.host == second == "h200"
            assert journal.border_title == f"journal · {second}"
            await pilot.press("q")
    finally:
        await asyncio.wait_for(sim.stop(), 10)
