"""Live monitoring in the TUI: known decode lines in the chart and stats, crash alerts.

Known lines are appended to the simulated host's journal as its running server would log
them (same unit, PID and invocation); the simulated server itself is told to log its own
decode lines only once an hour, so the numbers on screen are exactly the test's.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from textual.message import Message
from textual.notifications import Notification, Notify
from textual.pilot import Pilot

from console.app import SpecopsApp
from console.fleet.fleet import Fleet
from console.hosts.profiles import load_fleet
from console.sim.fleet import SimFleet
from console.sim.host import SimHost
from tests.ui.support import simulated_fleet, until
from widgets.accept_chart import AcceptChart
from widgets.alerts import AlertsScreen
from widgets.host_table import HostTable
from widgets.messages import CrashReceived
from widgets.stats_panel import StatsPanel

UNIT = "sglang-k26-ddtree.service"


@pytest.fixture
async def quiet_host(tmp_path: Path) -> AsyncIterator[SimFleet]:
    async with simulated_fleet(tmp_path, hosts=1, decode_interval_s=3600) as sim:
        yield sim


def log(host: SimHost, message: str, invocation: str | None = None, pid: str | None = None) -> None:
    """A line as the host's running server logs it."""
    host.journal.append(
        UNIT,
        message,
        _PID=pid or str(host.unit.main_pid),
        SYSLOG_IDENTIFIER="python3",
        _SYSTEMD_INVOCATION_ID=invocation or host.unit.invocation_id,
    )


def decode(accept: float, tps: float) -> str:
    return (
        f"[2026-12-01 12:00:00 TP0] Decode batch, #running-req: 16, #token: 19000, "
        f"token usage: 0.01, accept len: {accept:.2f}, accept rate: 0.43, cuda graph: True, "
        f"gen throughput (token/s): {tps:.2f}, #queue-req: 0, "
    )


async def ready(pilot: Pilot[int], app: SpecopsApp, host: SimHost) -> None:
    """The console follows the host's current run and knows its flags."""

    def following() -> bool:
        monitor = app.fleet.monitors[host.name]
        status = app.fleet.status.get(host.name)
        return (
            host.unit.server is not None
            and host.unit.server.ready
            and monitor.metrics.invocation_id == host.unit.invocation_id
            and status is not None
            and status.invocation_id == host.unit.invocation_id
            and bool(status.flags)
        )

    await until(pilot, following)


async def test_known_decode_lines_reach_the_chart_and_the_stats(quiet_host: SimFleet) -> None:
    host = quiet_host.hosts["b300"]
    messages: list[Message] = []
    app = SpecopsApp(Fleet(load_fleet(quiet_host.profiles_dir)))
    async with app.run_test(size=(150, 45), message_hook=messages.append) as pilot:
        await ready(pilot, app, host)
        chart = app.query_one(AcceptChart)
        assert chart.values["b300"] == []
        accepts = [4.20, 4.40, 5.40, 4.80]
        speeds = [1500.0, 1600.0, 1700.0, 1650.0]
        sent = time.monotonic()
        for accept, tps in zip(accepts, speeds, strict=True):
            log(host, decode(accept, tps))
        await until(pilot, lambda: chart.values["b300"] == accepts)
        shown_after = time.monotonic() - sent
        stats = app.query_one(StatsPanel)
        await until(pilot, lambda: _count(stats, "accept_len") == 4)

        # By hand: mean (4.20 + 4.40 + 5.40 + 4.80) / 4 = 4.70; median (4.40 + 4.80) / 2 = 4.60.
        summary = stats.summaries["accept_len"]
        for window in (summary.minute, summary.ten_minutes, summary.invocation):
            assert window is not None
            assert window.count == 4
            assert window.mean == pytest.approx(4.70)
            assert window.p50 == pytest.approx(4.60)
            assert (window.min, window.max, window.last) == (4.20, 5.40, 4.80)
        speed = stats.summaries["gen_throughput"].minute
        assert speed is not None and speed.mean == pytest.approx(1612.5)
        screen = app.export_screenshot()
        assert "4.70" in screen and "4.60" in screen and "1612" in screen
        assert "4.80&#160;&#160;(4.20–5.40)" in screen or "4.80  (4.20–5.40)" in screen
        row = app.query_one(HostTable).rows_by_name["b300"]
        assert (row.accept_len, row.throughput, row.graph) == (4.80, 1650.0, True)
        print(f"decode lines on screen {shown_after * 1000:.0f} ms after they were logged")


async def test_after_a_restart_the_windows_hold_only_this_run_and_the_last_is_its_own_row(
    quiet_host: SimFleet,
) -> None:
    host = quiet_host.hosts["b300"]
    app = SpecopsApp(Fleet(load_fleet(quiet_host.profiles_dir)))
    async with app.run_test(size=(150, 45)) as pilot:
        await ready(pilot, app, host)
        stats = app.query_one(StatsPanel)
        for accept in (6.10, 6.68, 6.30):  # the budget-32 run that answered garbage
            log(host, decode(accept, 800.0))
        await until(pilot, lambda: _count(stats, "accept_len") == 3)

        later = "d" * 32
        for accept in (4.36, 4.41):
            log(host, decode(accept, 1650.0), later, "9")
        await until(pilot, lambda: _count(stats, "accept_len") == 2)

        summary = stats.summaries["accept_len"]
        assert summary.ten_minutes is not None and summary.ten_minutes.max == 4.41
        assert summary.minute is not None and summary.minute.count == 2
        assert summary.previous is not None
        assert (summary.previous.count, summary.previous.max) == (3, 6.68)
        screen = app.export_screenshot().replace("&#160;", " ")
        assert "previous run" in screen and "same flags ×1" in screen
        assert summary.configuration_runs == 1  # the fake run's flags are not read: only itself


def _count(stats: StatsPanel, name: str) -> int:
    summary = stats.summaries.get(name)
    return 0 if summary is None or summary.invocation is None else summary.invocation.count


async def test_a_crash_alerts_turns_the_host_red_and_stays_listed(quiet_host: SimFleet) -> None:
    host = quiet_host.hosts["b300"]
    messages: list[Message] = []
    app = SpecopsApp(Fleet(load_fleet(quiet_host.profiles_dir)))
    async with app.run_test(size=(150, 45), message_hook=messages.append) as pilot:
        await ready(pilot, app, host)
        run = host.unit.invocation_id
        log(host, "[2026-12-01 12:00:01 TP0] Scheduler hit an exception: Traceback (most recent "
            "call last):")  # fmt: skip
        log(host, '  File "cuda_graph_runner.py", line 412, in capture')
        log(host, "torch.AcceleratorError: CUDA error: an illegal memory access was encountered")
        log(host, "[2026-12-01 12:00:01] Received sigquit from a child process.")

        def notified() -> list[Notification]:
            return [
                m.notification
                for m in messages
                if isinstance(m, Notify) and m.notification.severity == "error"
            ]

        await until(pilot, notified)
        (note,) = notified()  # one alert for the run, not one per signature line
        assert "b300: illegal_memory_access" in note.message
        assert "an illegal memory access was encountered" in note.message
        assert "budget=8" in note.message and "cuda_graph=on" in note.message
        (received,) = [m.event for m in messages if isinstance(m, CrashReceived)]
        assert received.invocation == run and received.flags is not None
        assert received.flags["budget"] == 8
        table = app.query_one(HostTable)
        assert table.rows_by_name["b300"].crashed and table.has_class("-crashed")

        await pilot.press("A")
        alerts = app.screen
        assert isinstance(alerts, AlertsScreen)
        assert [c.signature for c in alerts.crashes] == ["illegal_memory_access"]
        assert "budget=8" in app.export_screenshot()  # the list shows the run's flags
        await pilot.press("escape")
        assert not isinstance(app.screen, AlertsScreen)

        # A later run that comes up healthy clears the red; the alert stays listed.
        later = "c" * 32
        log(host, "[2026-12-01 12:01:00] The server is fired up and ready to roll!", later, "9")
        await until(pilot, lambda: not table.rows_by_name["b300"].crashed)
        assert not table.has_class("-crashed")
        assert [c.invocation for c in app.crashes] == [run]
