"""Live numbers into the fleet table, the accept-length chart and the stats panel.

Host and unit states, `/health`, accept length and throughput, the age of the newest decode
line, restarts, and a new run: each pushed into the widgets that show it, on an event or on a
timer (the numbers at most four times a second, the stats windows once a second).
"""

from __future__ import annotations

import time
from collections import deque

from textual import on

from console.fleet.filter import UNOPENED
from console.hosts.events import InvocationChanged
from console.ui.shell import NOTIFY_TIMEOUT_S, Shell
from console.watch.gpu_reader import GpuReading
from widgets.accept_chart import POINTS as CHART_POINTS
from widgets.accept_chart import AcceptChart
from widgets.gpu_view import HISTORY as GPU_HISTORY
from widgets.gpu_view import GpuScreen
from widgets.host_table import HostTable
from widgets.journal_view import JournalView
from widgets.messages import (
    GpusUpdated,
    HealthUpdated,
    HostStateUpdated,
    RunChanged,
    ServiceStatusUpdated,
)
from widgets.stats_panel import StatsPanel

STATS_INTERVAL_S = 1.0
"""The stats windows slide with time even when no line arrives."""
METRICS_INTERVAL_S = 0.25
"""How often new numbers are drawn (chart, host table, stats): at most 4 layouts a second."""
REMOTE_FRESH_S = 30.0
"""Numbers from Prometheus this recent keep an idle host's row live (not stale)."""
JOURNAL_PRECEDENCE_S = 15.0
"""A host's journal numbers this recent keep /metrics' and Prometheus' out of its table row."""


class Monitoring(Shell):
    """Draws what the engine measured; the engine thread's side is in engine_bridge.py."""

    _demand_sent: tuple[frozenset[str], str | None] = (frozenset(), None)
    """The rows on screen and the selected host the fleet was last told of."""
    _remote_numbers_at: dict[str, float]
    """When each host last had numbers from /metrics or Prometheus (monotonic)."""
    _journal_numbers_at: dict[str, float]
    """When each host's journal last gave numbers (monotonic); /metrics or Prometheus
    numbers fill the table only when the journal has given none for a while."""

    _kv_share: dict[str, float]
    """Each host's newest KV-cache share in use (the stats panel's title)."""
    _gpu_readings: dict[str, deque[GpuReading]]
    """Each host's newest GPU readings (the `u` screen's history)."""

    @on(HostStateUpdated)
    def _host_state(self, message: HostStateUpdated) -> None:
        if table := self.main(HostTable):
            table.set_state(message.event.state)
            view = self.main(JournalView)
            if view is not None and view.host == message.event.state.host:
                view.set_host_note(self._journal_note(message.event.state.host))

    def _journal_note(self, host: str) -> str:
        """What the journal's title says after the host's name: why an idle host is quiet."""
        table = self.main(HostTable)
        row = table.rows_by_name.get(host) if table is not None else None
        if row is None or not row.idle:
            return ""
        return "idle (closed on demand): read back when opened"

    @on(ServiceStatusUpdated)
    def _service_status(self, message: ServiceStatusUpdated) -> None:
        if table := self.main(HostTable):
            table.set_status(message.event)

    def _show_stats(self) -> None:
        host = self.selected_host
        panel, chart = self.main(StatsPanel), self.main(AcceptChart)
        if host is None or panel is None or chart is None:
            return
        monitor = self.fleet.monitors[host]
        summaries = {n: monitor.summary(n) for n in ("accept_len", "gen_throughput")}
        panel.show(host, summaries, self._kv_share.get(host))
        chart.select(host)
        self._chart_follows_table()

    def _chart_follows_table(self) -> None:
        """The chart draws the hosts whose rows the table shows, in the table's order."""
        chart, table = self.main(AcceptChart), self.main(HostTable)
        if chart is not None and table is not None:
            chart.show_hosts(table.rows_on_screen())

    def _draw_metrics(self) -> None:
        chart, table = self.main(AcceptChart), self.main(HostTable)
        if not self._metrics_due or chart is None or table is None:
            return
        due = [self._metrics_due.popitem() for _ in range(len(self._metrics_due))]
        now = time.monotonic()
        for host, event in due:
            if event.source == "journal":
                self._journal_numbers_at[host] = now
            else:
                self._remote_numbers_at[host] = now
                journal_age = now - self._journal_numbers_at.get(host, -JOURNAL_PRECEDENCE_S)
                if journal_age < JOURNAL_PRECEDENCE_S:
                    continue  # the journal's own numbers are fresh: they stay in the table
            chart.update_host(host, self._chart_values(host))
            values = event.values
            if (kv := values.get("token_usage")) is not None:
                self._kv_share[host] = kv
                panel = self.main(StatsPanel)
                if panel is not None and host == self.selected_host:
                    panel.title_for(host, kv)
            table.set_metrics(
                host,
                values.get("accept_len"),
                values.get("gen_throughput"),
                event.graph,
                source=event.source,
            )
        # The stats panel (a table of windows over minutes) is redrawn by its 1 s timer:
        # drawing it at 4 Hz was the most expensive part of a busy frame.

    @on(HealthUpdated)
    def _health(self, message: HealthUpdated) -> None:
        if table := self.main(HostTable):
            table.set_health(message.event.host, message.event.health)

    @on(GpusUpdated)
    def _gpus(self, message: GpusUpdated) -> None:
        reading = message.reading
        kept = self._gpu_readings.setdefault(reading.host, deque(maxlen=GPU_HISTORY))
        kept.append(reading)
        if table := self.main(HostTable):
            table.set_gpus(reading.host, reading.gpus)
        for xid in reading.xids:
            self.xids.append(xid)
            crash = next(
                (c for c in reversed(self.crashes) if c.host == xid.host and xid.near(c.timestamp)),
                None,
            )
            text = xid.text() + (f"\nat the crash: {crash.signature}" if crash else "")
            title = f"{xid.host}: GPU driver error"
            self.notify(text, title=title, severity="error", timeout=NOTIFY_TIMEOUT_S, markup=False)
        screen = self.screen_stack[-1] if self.screen_stack else None  # none: quitting
        if isinstance(screen, GpuScreen) and screen.host == reading.host:
            screen.update_readings(kept)

    def action_show_gpus(self) -> None:
        """`u`: the selected host's GPUs, each with its memory and utilization history."""
        host = self.selected_host
        if host is None or len(self.screen_stack) > 1:
            return
        self.push_screen(GpuScreen(host, self._gpu_readings.get(host, ())))

    def _draw_freshness(self) -> None:
        """Ages of the newest decode lines and restarts in the window (both change with time
        alone, without any event), and which hosts are on screen: only their `/health` is
        polled, so a 64-host fleet asks ~11 hosts."""
        table = self.main(HostTable)
        if table is None:
            return
        now = time.monotonic()
        for name in self.host_names:
            fresh = self.fleet.monitors[name].freshness()
            remote = now - self._remote_numbers_at.get(name, -REMOTE_FRESH_S)
            if table.rows_by_name[name].idle and remote < REMOTE_FRESH_S:
                # Idle (on-demand mode), its numbers from Prometheus: live, not stale.
                table.set_freshness(name, remote, False)
            elif fresh is None:
                table.set_freshness(name, None, False)
            else:
                table.set_freshness(name, fresh.age_s, fresh.stale)
            restarts = self.fleet.monitors[name].restart_summary()
            table.set_restarts(name, restarts.recent, restarts.looping)
        if table.arranged:  # a sort by tok/s or a filter on state follows the hosts
            table.rearrange()
        table.fit_widths()  # a column a long state pushed off comes back once it is gone
        self._publish_on_screen()

    def _publish_on_screen(self) -> None:
        """Tell the fleet which hosts are on screen and which is selected: only their
        `/health` is polled, and in on-demand mode they are the hosts kept open."""
        table = self.main(HostTable)
        if table is None:
            return
        rows = table.rows_on_screen()
        visible = frozenset(rows)
        self.fleet.watched = visible.__contains__
        self._chart_follows_table()
        if not self.engine.running:
            return
        selected = table.cursor_host
        if self.fleet.demand is not None and table.host_filter.selects_state(*UNOPENED):
            # Listing the idle hosts must not open them (the selected one included: each
            # opened would leave the list and the cursor would land on, and open, the next).
            rows, visible, selected = [], frozenset(), None
        wanted = (visible, selected)
        if wanted != self._demand_sent:  # the engine hears of changes only
            self._demand_sent = wanted
            self.engine.call(self.fleet.on_screen, rows)
            self.engine.call(self.fleet.select, selected)

    @on(HostTable.Scrolled, "#hosts")
    def _rows_scrolled(self) -> None:
        self._publish_on_screen()  # a page down opens the new page's hosts now, not in 1 s

    def _chart_values(self, host: str) -> list[float]:
        return self.fleet.monitors[host].recent("accept_len", newest=CHART_POINTS)

    @on(RunChanged)
    def _run_changed(self, message: RunChanged) -> None:
        event = message.event
        table, chart = self.main(HostTable), self.main(AcceptChart)
        if table is None or chart is None:
            return
        if isinstance(event, InvocationChanged):
            table.new_run(event.host)
            chart.update_host(event.host, self._chart_values(event.host))
            return
        last = next((c for c in reversed(self.crashes) if c.host == event.host), None)
        if last is not None and last.invocation != event.invocation:
            table.set_crashed(event.host, False)  # a later run came up: healthy again
