"""The Textual app shell: composes widgets and turns engine events into messages.

With `widgets/`, the only code that imports Textual. The fleet is injected, so the same app
runs over real hosts, the demo's simulated fleet, and the tests' in-process hosts.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import gc
import logging
import os
import time
from collections import deque
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path
from typing import TypeVar, cast

# Textual paints a changed screen on its next frame tick, at most TEXTUAL_FPS (default 60)
# a second: a key's repaint waited up to 17 ms for the tick (keys p99 50 -> 39 ms at 240).
# It bounds latency, not work: frames are only drawn when something changed (under a
# flood 228 frames where 60 fps drew 200, for the same UI CPU). Read when Textual is first
# imported; an operator's own TEXTUAL_FPS wins.
os.environ.setdefault("TEXTUAL_FPS", "240")

from textual import events, on, work
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding
from textual.containers import Horizontal
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Footer, Header, Input
from textual.worker import Worker, WorkerState

from console.audit import action_record
from console.engine import EngineThread
from console.events import (
    CrashDetected,
    Event,
    HealthChecked,
    HostStateChanged,
    InvocationChanged,
    JournalBatch,
    MetricsUpdated,
    RolloutEvent,
    ServiceReady,
    ServiceStatus,
    SnapshotProgress,
)
from console.evidence.host_bench import HostBench, read_host_bench
from console.evidence.ledger import (
    Experiment,
    NotOnHost,
    current_invocation,
    read_ledger,
    record_rollout,
    utc_now,
)
from console.evidence.package import Job, SnapshotError, package_dir, plan
from console.evidence.report import write_report
from console.evidence.snapshot import run_snapshot
from console.fleet import Fleet
from console.fleet_filter import FilterError, parse_filter
from console.profiles import FlagValue
from console.settings import Settings, state_dir
from console.state import load_last_good, write_atomic
from console.transport.ssh import HostSession, RemoteError
from console.tuning.flag_history import flag_history
from console.tuning.history_rows import read_host_history
from console.tuning.left_on import LeftOnFound, LeftOnWatch
from console.tuning.plan import Plan, prepare
from console.tuning.probation import ProbationEvent, ProbationGuard
from console.tuning.rollback import prepare_rollback
from console.tuning.rollout import Rollout, RolloutOptions
from console.watch.journal import LineFilter
from widgets.accept_chart import POINTS as CHART_POINTS
from widgets.accept_chart import AcceptChart
from widgets.alerts import AlertsScreen, LeftOnUpdated, alert_text
from widgets.audit_view import AuditScreen
from widgets.bench_view import BenchScreen
from widgets.commands import palette_commands
from widgets.compare_view import CompareScreen
from widgets.flag_editor import FlagEditorScreen
from widgets.help_screen import HelpScreen
from widgets.history_view import HistoryScreen
from widgets.host_table import HostTable
from widgets.journal_view import JournalView, PromptInput
from widgets.messages import (
    CrashReceived,
    HealthUpdated,
    HostStateUpdated,
    RunChanged,
    ServiceStatusUpdated,
    SnapshotFinished,
    SnapshotProgressed,
)
from widgets.probation_banner import ProbationBanner, ProbationUpdated, probation_note
from widgets.rollback_confirm import RollbackConfirmScreen, RollbackPlanner
from widgets.rollout_view import (
    OUTCOME_SEVERITY,
    RolloutScreen,
    RolloutUpdated,
    outcome_text,
    rollout_group,
)
from widgets.snapshot_panel import SnapshotPanel
from widgets.stats_panel import StatsPanel

log = logging.getLogger(__name__)
W = TypeVar("W", bound=Widget)

FLUSH_INTERVAL_S = 0.05
QUIT_CONFIRM_S = 5.0
STATS_INTERVAL_S = 1.0
"""The stats windows slide with time even when no line arrives."""
METRICS_INTERVAL_S = 0.25
"""How often new numbers are drawn (chart, host table, stats): at most 4 layouts a second."""
ALERTS_KEPT = 200
JOURNAL_PRECEDENCE_S = 15.0
"""A host's journal numbers this recent keep /metrics' and Prometheus' out of its table row."""
ALERT_TIMEOUT_S = 30.0
"""A crash loop notifies once per this many seconds per host and signature."""
NOTIFY_TIMEOUT_S = 6.0
"""How long a notification covers the journal: every crash stays listed under `A`, and a
rollout's outcome stays on its screen and in the audit log."""
GC_THRESHOLDS = (10_000, 50, 1000)
MAX_INBOX_RECORDS = 20_000
"""Journal records waiting for the view beyond which the followers pause (back-pressure)."""
DRAIN_BUDGET_S = 0.012
"""Time one flush may spend taking records from the inbox; the rest waits a tick."""
INPUT_PRIORITY_S = 0.1
"""After a key, the engine's thread sleeps until the screen has answered it (at most this
long): under a flood it would otherwise take half the GIL from the repaint the operator is
waiting for. The lines wait in the sockets and on the hosts meanwhile; nothing is lost."""
COMPACT_WIDTH, COMPACT_HEIGHT = 120, 34
"""Below either, the stats panel folds away (`t` shows it) so the journal keeps its rows."""


class SpecopsApp(App[int]):
    CSS_PATH = "app.tcss"
    TITLE = "specops"

    BINDINGS = [
        Binding("q", "quit", "Quit", id="quit"),
        Binding("f", "edit_flags", "Flags", id="flags-edit"),
        Binding("h", "show_history", "History", id="history-view", show=False),
        Binding("R", "rollback", "Roll back", id="rollback", show=False),
        # priority: otherwise the screen's focus-next takes tab before the app sees it.
        Binding("tab", "next_host", "Next host", id="next-host", show=False, priority=True),
        Binding("s", "snapshot_host", "Snapshot", id="snapshot-host"),
        Binding("S", "snapshot_all", "Snapshot all", id="snapshot-all"),
        Binding("escape", "hide_snapshot", "Hide snapshot", id="snapshot-hide", show=False),
        Binding("a", "toggle_all_lines", "All lines", id="all-lines"),
        Binding("e", "edit_filter", "Filter", id="filter-edit"),
        Binding("slash", "search", "Search", id="search-journal", key_display="/"),
        Binding("n", "search_next(True)", "Older match", id="search-next", show=False),
        Binding("N", "search_next(False)", "Newer match", id="search-previous", show=False),
        Binding("m", "toggle_merged", "Merged", id="merged-journal"),
        Binding("p", "toggle_pause", "Pause", id="pause-tail"),
        Binding("G,end", "resume_tail", "Resume tail", id="resume-tail", show=False),
        Binding("A", "show_alerts", "Alerts", id="alerts-list"),
        Binding("L", "show_audit", "Audit log", id="audit-log"),
        Binding("b", "show_bench", "Bench", id="bench-view", show=False),
        Binding("c", "show_compare", "Compare", id="compare-view", show=False),
        Binding("r", "write_report", "Report", id="report-write", show=False),
        Binding("y", "yank_view", "Copy view", id="yank-view"),
        Binding("Y", "yank_line", "Copy line", id="yank-line", show=False),
        Binding("w", "save_view", "Save view", id="save-view", show=False),
        Binding("t", "toggle_stats", "Stats", id="stats-toggle", show=False),
        Binding("g", "group_hosts", "Group hosts", id="hosts-group", show=False),
        Binding("o", "sort_hosts", "Sort hosts", id="hosts-sort", show=False),
        Binding("O", "reverse_hosts", "Reverse sort", id="hosts-sort-reverse", show=False),
        Binding("F", "filter_hosts", "Filter hosts", id="hosts-filter", show=False),
        Binding("question_mark", "help", "Help", id="help", key_display="?"),
        Binding("x", "probation_cancel", "Cancel rollback", id="probation-cancel", show=False),
        *[
            Binding(str(i), f"select_index({i})", f"Host {i}", id=f"host-{i}", show=False)
            for i in range(1, 10)
        ],
    ]

    def __init__(
        self, fleet: Fleet, *, read_only: bool = False, settings: Settings | None = None
    ) -> None:
        super().__init__()
        self.settings = settings or Settings()
        self.fleet = fleet
        self.read_only = read_only or self.settings.read_only
        self._quit_asked = 0.0
        self._rollout_screens: dict[str, RolloutScreen] = {}
        """The newest rollout screen per host: where that host's rollout events are shown."""
        self.host_names = list(fleet.profiles)
        self._buffer_lines = self.settings.journal_lines
        self._stats_wanted: bool | None = None
        """The operator's `t` choice; None follows the terminal size."""
        self.crashes: deque[CrashDetected] = deque(maxlen=ALERTS_KEPT)
        """Every crash alert since start, for the alerts list (`A`)."""
        self._notified: dict[tuple[str, str], float] = {}
        self.engine = EngineThread()
        """The fleet's own loop: sessions, followers, rollouts and snapshots run there."""
        # Written by the engine's thread, read here: a dict item assignment and popitem, a
        # deque append and popleft, and two counters each written by one side only.
        self._metrics_due: dict[str, MetricsUpdated] = {}
        self._journal_numbers_at: dict[str, float] = {}
        """When each host's journal last gave numbers (monotonic); /metrics or Prometheus
        numbers fill the table only when the journal has given none for a while."""
        self._inbox: deque[JournalBatch] = deque()
        self._inbox_added = 0
        self._inbox_taken = 0
        self._input_until = 0.0
        self._input_key: object = None
        self._main_widgets: dict[tuple[type[Widget], str | None], Widget] = {}
        self.probation = ProbationGuard(
            fleet.sessions,
            self._probation_rollback,
            self._probation_posted,
            read_only="read-only console" if self.read_only else None,
        )
        """Rolls back a crash during probation (console/tuning/probation.py), on the engine."""
        self.left_on = LeftOnWatch(fleet.sessions, lambda f: self.post_message(LeftOnUpdated(f)))
        """Finds hosts a change did not finish on (console/tuning/left_on.py), on the engine."""
        self.left_ons: deque[LeftOnFound] = deque(maxlen=ALERTS_KEPT)

    def compose(self) -> ComposeResult:
        yield Header()
        groups = {n: p.groups for n, p in self.fleet.profiles.items()}
        yield HostTable(self.host_names, groups, id="hosts")
        with Horizontal(id="monitor"):
            yield AcceptChart(self.host_names, id="chart")
            yield StatsPanel(id="stats")
        filters = {n: LineFilter(p.journal.patterns) for n, p in self.fleet.profiles.items()}
        yield JournalView(self._buffer_lines, filters, id="journal")
        yield PromptInput(placeholder="filter regex (empty: the profiles' patterns)", id="filter")
        yield PromptInput(placeholder="search the journal view", id="search")
        yield PromptInput(
            placeholder="hosts: name~b300 state=down group=pro6000 (empty: every host)",
            id="fleet-filter",
        )
        yield SnapshotPanel(id="snapshot")
        yield ProbationBanner(id="probation")
        yield Footer()

    def on_mount(self) -> None:
        # The journal buffers hold tens of thousands of long-lived objects; with the default
        # thresholds a full collection walks them all every few seconds (100–350 ms stalls
        # measured under 1k lines/s). Start-up objects go to the permanent generation and
        # young collections run less often; memory is bounded by the buffers either way.
        self._gc_thresholds = gc.get_threshold()
        gc.freeze()
        gc.set_threshold(*GC_THRESHOLDS)
        if self.settings.theme in self.available_themes:
            self.theme = self.settings.theme
        else:
            self.notify(f"unknown theme {self.settings.theme!r} in settings", severity="warning")
        if self.settings.keymap:
            self.set_keymap(self.settings.keymap)
        if self.read_only:
            self.sub_title = "read-only"
        self.fleet.listen(self._forward)
        # Back-pressure: while the app is behind, the followers stop reading and the lines
        # wait in the hosts' journals (no loss) instead of in this process's memory.
        self.fleet.pressure = lambda: self.inbox_records > MAX_INBOX_RECORDS
        # Input comes first: while a key is being answered the engine sleeps (see on_event).
        self.fleet.checkpoint = self.engine.checkpoint
        self.engine.start()
        self.engine.call(self.fleet.start)
        if self.host_names:
            self.query_one(JournalView).show_host(self.host_names[0])
            self._show_stats()
        self.set_interval(FLUSH_INTERVAL_S, self._flush_journal)
        self.set_interval(STATS_INTERVAL_S, self._show_stats)
        self.set_interval(STATS_INTERVAL_S, self._draw_freshness)
        self.set_interval(METRICS_INTERVAL_S, self._draw_metrics)
        self.query_one(JournalView).focus()

    async def on_unmount(self) -> None:
        if self.engine.running:
            await self.engine.run(self.probation.stop())
            await self.engine.run(self.left_on.stop())
            await self.engine.run(self.fleet.stop())
            self.engine.stop()
        gc.unfreeze()
        gc.set_threshold(*self._gc_thresholds)

    async def on_event(self, event: events.Event) -> None:
        if not isinstance(event, events.Key):
            await super().on_event(event)
            return
        # A key reaches the app twice (dispatched, then bubbled back from the focused
        # widget): only the refresh after the last arrival answers it.
        self._input_until = time.monotonic() + INPUT_PRIORITY_S
        self._input_key = key = object()
        self.engine.pause(INPUT_PRIORITY_S)  # released by `_input_answered`
        await super().on_event(event)
        self.call_after_refresh(self._input_answered, key)

    def _input_answered(self, key: object) -> None:
        if key is self._input_key:
            self._input_until = 0.0
            self.engine.resume()

    @property
    def inbox_records(self) -> int:
        """Journal records delivered by the engine and not yet taken by the view."""
        return self._inbox_added - self._inbox_taken

    def _forward(self, event: Event) -> None:
        """Runs on the engine's thread: only thread-safe steps here."""
        self.probation.observe(event)
        self.left_on.observe(event)
        if isinstance(event, HostStateChanged):
            self.post_message(HostStateUpdated(event))
        elif isinstance(event, ServiceStatus):
            self.post_message(ServiceStatusUpdated(event))
        elif isinstance(event, JournalBatch):
            # The firehose skips the message queue: a key press must never wait behind
            # hundreds of queued batches. The flush timer drains this inbox in slices.
            self._inbox_added += len(event.entries)
            self._inbox.append(event)
        elif isinstance(event, MetricsUpdated):
            due = self._metrics_due.get(event.host)
            if event.source == "journal" or due is None or due.source != "journal":
                self._metrics_due[event.host] = event  # drawn by the metrics timer
        elif isinstance(event, CrashDetected):
            self.post_message(CrashReceived(event))
        elif isinstance(event, HealthChecked):
            self.post_message(HealthUpdated(event))
        elif isinstance(event, InvocationChanged | ServiceReady):
            self.post_message(RunChanged(event))

    # --- operator comfort: help, palette, copy, save, layout, errors ---------------------

    def action_help(self) -> None:
        if len(self.screen_stack) == 1:
            live = [active.binding for active in self.screen.active_bindings.values()]
            keys = _with_app_bindings(live, _bindings(self.BINDINGS))
            hosts = {f"select_index({i})" for i in range(1, len(self.host_names) + 1)}
            keys = [b for b in keys if not b.action.startswith("select_index") or b.action in hosts]
            self.push_screen(HelpScreen(keys))

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:  # type: ignore[type-arg]
        yield from super().get_system_commands(screen)
        for command in palette_commands(_bindings(self.BINDINGS), self.host_names):
            action = command.action
            yield SystemCommand(command.title, command.help, lambda a=action: self._palette(a))

    async def _palette(self, action: str) -> None:
        await self.run_action(action)

    def action_show_audit(self) -> None:
        if len(self.screen_stack) == 1:
            self.push_screen(AuditScreen())

    def _selected_package(self) -> Path | None:
        name = self.selected_host
        if name is None:
            return None
        return package_dir(self.fleet.profiles[name].artifacts.package)

    def action_show_bench(self) -> None:
        package, name = self._selected_package(), self.selected_host
        if package is None or name is None or len(self.screen_stack) != 1:
            return
        session = self.fleet.sessions[name]

        async def read_host() -> HostBench:
            return await self.engine.run(read_host_bench(session))

        self.push_screen(BenchScreen(package, name, read_host))

    def action_show_compare(self) -> None:
        name = self.selected_host
        if name is None or len(self.screen_stack) != 1:
            return
        session = self.fleet.sessions[name]

        async def read() -> tuple[list[Experiment], str]:
            return await self.engine.run(read_ledger(session))

        self.push_screen(CompareScreen(name, read))

    def action_write_report(self) -> None:
        """The findings report into the package of the last snapshot (else the host's)."""
        panel = self.main(SnapshotPanel)
        if panel is not None and panel.running:
            self.notify("a snapshot is running: report after it", title="report")
            return
        report = panel.report if panel is not None else None
        packages = [p.path for p in report.packages] if report is not None else []
        selected = self._selected_package()
        if not packages and selected is not None:
            packages = [selected]
        for package in packages:
            self._write_report(package)

    @work(thread=True, group="report", exit_on_error=False, description="report")
    def _write_report(self, package: Path) -> None:
        try:
            written, manifest = write_report(package)
        except OSError as exc:
            self.call_from_thread(
                self.notify, f"{package}: {exc}", title="report", severity="error", markup=False
            )
            return
        what = "written" if written else "unchanged"
        extra = "; manifest refreshed" if manifest else ""
        self.call_from_thread(
            self.notify, f"{package / 'REPORT.md'} {what}{extra}", title="report", markup=False
        )

    def action_yank_view(self) -> None:
        if view := self.main(JournalView):
            text = view.visible_text()
            self.copy_to_clipboard(text)  # OSC 52: reaches the local clipboard over SSH
            self.notify(f"copied {text.count(chr(10)) + bool(text)} lines", title="clipboard")

    def action_yank_line(self) -> None:
        view = self.main(JournalView)
        line = view.current_line() if view is not None else None
        if line is not None:
            self.copy_to_clipboard(line)
            self.notify(line[:120], title="copied line", markup=False)

    def action_save_view(self) -> None:
        view = self.main(JournalView)
        if view is None:
            return
        stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
        path = state_dir() / "saved" / f"{view.view_name}-{stamp}.log"
        try:
            write_atomic(path, "\n".join(view.lines) + "\n")
        except OSError as exc:
            self.notify(f"{path}: {exc.strerror}", title="save failed", severity="error")
            return
        self.notify(str(path), title=f"saved {len(view.lines)} lines", markup=False)

    def action_toggle_stats(self) -> None:
        if stats := self.main(StatsPanel):
            self._stats_wanted = not stats.display
            stats.display = self._stats_wanted

    def on_resize(self, event: events.Resize) -> None:
        compact = event.size.width < COMPACT_WIDTH or event.size.height < COMPACT_HEIGHT
        self.screen_stack[0].set_class(compact, "-compact")
        if (stats := self.main(StatsPanel)) is not None and self._stats_wanted is None:
            stats.display = not compact

    @on(Worker.StateChanged)
    def _worker_failed(self, event: Worker.StateChanged) -> None:
        """A failed background job becomes a notification; the app and the hosts go on."""
        if event.state is WorkerState.ERROR:
            error = event.worker.error
            self.notify(
                f"{event.worker.description or event.worker.name}: {type(error).__name__}: {error}",
                title="background task failed",
                severity="error",
                markup=False,
            )

    def _flush_journal(self) -> None:
        view = self.main(JournalView)  # also behind a modal; none once shutting down
        if view is None or time.monotonic() < self._input_until:
            return  # a key is waiting for its repaint: the new lines go in the frame after
        deadline = time.perf_counter() + DRAIN_BUDGET_S
        while self._inbox and time.perf_counter() < deadline:
            batch = self._inbox.popleft()
            self._inbox_taken += len(batch.entries)
            view.add(batch.host, batch.entries)
        view.flush()

    def main(self, kind: type[W], selector: str | None = None) -> W | None:
        """A widget of the main screen, whatever is on top of it; None once it is gone.

        `query_one` searches the active screen: with a modal open (alerts, flags, help) or
        the app shutting down, every engine event would otherwise raise `NoMatches`. Found
        widgets are remembered while mounted: a DOM query per timer tick and per event was
        a millisecond each under a flood.
        """
        key = (kind, selector)
        widget = self._main_widgets.get(key)
        if widget is not None and widget.is_attached:
            return cast(W, widget)
        if not self.screen_stack:
            return None
        for found in self.screen_stack[0].query(selector or kind):
            if isinstance(found, kind):
                self._main_widgets[key] = found
                return found
        return None

    @on(HostStateUpdated)
    def _host_state(self, message: HostStateUpdated) -> None:
        if table := self.main(HostTable):
            table.set_state(message.event.state)

    @on(ServiceStatusUpdated)
    def _service_status(self, message: ServiceStatusUpdated) -> None:
        if table := self.main(HostTable):
            table.set_status(message.event)

    @on(HostTable.RowHighlighted, "#hosts")
    def _row_highlighted(self, message: HostTable.RowHighlighted) -> None:
        view = self.main(JournalView)
        if view is not None:
            host = message.host
            view.show_host(host)
            if chart := self.main(AcceptChart):
                chart.select(host)
            # The stats panel follows a frame later: its windows over up to 20,000 samples
            # took 3-4 ms of the repaint a key press waits for (it is redrawn every second
            # anyway).
            self.call_after_refresh(self._show_stats)

    def action_select_index(self, index: int) -> None:
        """The host numbered `index` in the `#` column, wherever sorting put it."""
        table = self.main(HostTable)
        if table is not None and 1 <= index <= len(self.host_names):
            name = self.host_names[index - 1]
            if not table.select_host(name):
                self.notify(f"{name} is hidden by the host filter (F)", title="hosts")

    def action_next_host(self) -> None:
        if len(self.screen_stack) > 1:  # in a dialog, tab keeps its usual meaning
            self.screen.focus_next()
            return
        table = self.main(HostTable)
        if table is not None and table.names:
            table.move_cursor(row=(table.cursor_row + 1) % len(table.names))

    # --- live monitoring -----------------------------------------------------------------

    @property
    def selected_host(self) -> str | None:
        table = self.main(HostTable)
        return table.cursor_host if table is not None else None

    def _show_stats(self) -> None:
        host = self.selected_host
        panel, chart = self.main(StatsPanel), self.main(AcceptChart)
        if host is None or panel is None or chart is None:
            return
        monitor = self.fleet.monitors[host]
        panel.show(host, {n: monitor.summary(n) for n in ("accept_len", "gen_throughput")})
        chart.select(host)

    def _draw_metrics(self) -> None:
        chart, table = self.main(AcceptChart), self.main(HostTable)
        if not self._metrics_due or chart is None or table is None:
            return
        due = [self._metrics_due.popitem() for _ in range(len(self._metrics_due))]
        now = time.monotonic()
        for host, event in due:
            if event.source == "journal":
                self._journal_numbers_at[host] = now
            elif (
                now - self._journal_numbers_at.get(host, -JOURNAL_PRECEDENCE_S)
                < JOURNAL_PRECEDENCE_S
            ):
                continue  # the journal's own numbers are fresh: they stay in the table
            chart.update_host(host, self._chart_values(host))
            values = event.values
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

    def _draw_freshness(self) -> None:
        """Ages of the newest decode lines and restarts in the window (both change with time
        alone, without any event), and which hosts are on screen: only their `/health` is
        polled, so a 64-host fleet asks ~11 hosts."""
        table = self.main(HostTable)
        if table is None:
            return
        for name in self.host_names:
            fresh = self.fleet.monitors[name].freshness()
            if fresh is None:
                table.set_freshness(name, None, False)
            else:
                table.set_freshness(name, fresh.age_s, fresh.stale)
            restarts = self.fleet.monitors[name].restart_summary()
            table.set_restarts(name, restarts.recent, restarts.looping)
        if table.arranged:  # a sort by tok/s or a filter on state follows the hosts
            table.rearrange()
        visible = table.visible_names()
        self.fleet.watched = visible.__contains__

    def _chart_values(self, host: str) -> list[float]:
        return self.fleet.monitors[host].recent("accept_len", newest=CHART_POINTS)

    @on(CrashReceived)
    def _crash(self, message: CrashReceived) -> None:
        crash = message.event
        self.crashes.append(crash)
        if table := self.main(HostTable):
            table.set_crashed(crash.host, True)
        view = self.main(JournalView)
        if view is not None and crash.live:
            view.note_crash()
        key = (crash.host, crash.signature)
        now = time.monotonic()
        # A crash loop (systemd restarting into the same crash) notifies once per timeout;
        # every run is still in the alerts list.
        if crash.live and now - self._notified.get(key, -ALERT_TIMEOUT_S) >= ALERT_TIMEOUT_S:
            self._notified[key] = now
            title = f"crash on {crash.host}"
            text = alert_text(crash)
            self.notify(text, title=title, severity="error", timeout=NOTIFY_TIMEOUT_S, markup=False)

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

    def action_toggle_all_lines(self) -> None:
        if view := self.main(JournalView):
            view.toggle_all()

    def action_toggle_merged(self) -> None:
        if view := self.main(JournalView):
            view.toggle_merged()

    def action_toggle_pause(self) -> None:
        if view := self.main(JournalView):
            view.toggle_pause()

    def action_resume_tail(self) -> None:
        if view := self.main(JournalView):
            view.resume()

    def action_edit_filter(self) -> None:
        view, prompt = self.main(JournalView), self.main(PromptInput, "#filter")
        if view is not None and prompt is not None and self.screen is self.screen_stack[0]:
            prompt.open(view.filter_text)

    def action_search(self) -> None:
        view, prompt = self.main(JournalView), self.main(PromptInput, "#search")
        if view is not None and prompt is not None and self.screen is self.screen_stack[0]:
            prompt.open()  # empty: enter ends the search; `n`/`N` repeat the current one

    def action_search_next(self, older: bool) -> None:
        if view := self.main(JournalView):
            view.search_next(older)

    # --- the fleet table's order ------------------------------------------------------------

    def action_group_hosts(self) -> None:
        if table := self.main(HostTable):
            table.set_grouped(not table.grouped)

    def action_sort_hosts(self) -> None:
        if table := self.main(HostTable):
            table.cycle_sort()

    def action_reverse_hosts(self) -> None:
        if table := self.main(HostTable):
            table.reverse_sort()

    def action_filter_hosts(self) -> None:
        table, prompt = self.main(HostTable), self.main(PromptInput, "#fleet-filter")
        if table is not None and prompt is not None and self.screen is self.screen_stack[0]:
            prompt.open(table.host_filter.text)

    @on(Input.Submitted, "#fleet-filter")
    def _fleet_filter_submitted(self, message: Input.Submitted) -> None:
        table, prompt = self.main(HostTable), self.main(PromptInput, "#fleet-filter")
        if table is None or prompt is None:
            return
        try:
            query = parse_filter(message.value, table.groups)
        except FilterError as exc:  # the prompt stays open with the text to fix
            self.notify(str(exc), title="host filter", severity="error", markup=False)
            return
        table.set_filter(query)
        prompt.action_close()
        if query.terms and not table.names:
            self.notify(f"no host matches {query.text!r}", title="host filter")

    def action_show_alerts(self) -> None:
        if table := self.main(HostTable):
            table.mark_seen()  # the operator is looking at them now
        if not isinstance(self.screen, AlertsScreen):
            self.push_screen(AlertsScreen(self.crashes, self.left_ons))

    @on(Input.Submitted, "#filter")
    def _filter_submitted(self, message: Input.Submitted) -> None:
        view, prompt = self.main(JournalView), self.main(PromptInput, "#filter")
        if view is None or prompt is None:
            return
        try:
            view.set_custom_filter(message.value)
        except ValueError as exc:
            self.notify(str(exc), title="filter", severity="error", markup=False)
            return
        prompt.action_close()

    @on(Input.Submitted, "#search")
    def _search_submitted(self, message: Input.Submitted) -> None:
        view, prompt = self.main(JournalView), self.main(PromptInput, "#search")
        if view is not None and prompt is not None:
            view.search(message.value)
            prompt.action_close()

    # --- snapshot ------------------------------------------------------------------------

    def action_snapshot_host(self) -> None:
        if (name := self.selected_host) is not None:
            self._snapshot([name])

    def action_snapshot_all(self) -> None:
        self._snapshot(self.host_names)

    def action_hide_snapshot(self) -> None:
        panel = self.query_one(SnapshotPanel)
        if not panel.running:
            panel.hide()

    def _snapshot(self, names: list[str]) -> None:
        panel = self.query_one(SnapshotPanel)
        if panel.running:
            self.notify("a snapshot is already running", title="snapshot")
            return
        try:
            jobs = plan([self.fleet.profiles[n] for n in names])
        except SnapshotError as exc:  # nothing was contacted or transferred
            self.notify(str(exc), title="snapshot refused", severity="error", markup=False)
            return
        panel.start(names)
        self._run_snapshot(jobs)

    @work(group="snapshot", exit_on_error=False, description="snapshot")
    async def _run_snapshot(self, jobs: list[Job]) -> None:
        pairs = [(job, self.fleet.sessions[job.profile.name]) for job in jobs]

        def progressed(event: SnapshotProgress) -> None:
            self.post_message(SnapshotProgressed(event))

        try:
            report = await self.engine.run(run_snapshot(pairs, progressed))
        except Exception as exc:
            self.post_message(SnapshotFinished(None, f"{type(exc).__name__}: {exc}"))
            raise
        self.post_message(SnapshotFinished(report))

    @on(SnapshotProgressed)
    def _snapshot_progress(self, message: SnapshotProgressed) -> None:
        self.query_one(SnapshotPanel).progress(message.event)

    @on(SnapshotFinished)
    def _snapshot_finished(self, message: SnapshotFinished) -> None:
        self.query_one(SnapshotPanel).finish(message.report, message.error)

    # --- flags -----------------------------------------------------------------------------

    def action_edit_flags(self) -> None:
        if self.read_only:
            self.notify("read-only: flag changes are disabled", title="flags", severity="warning")
            return
        name = self.selected_host
        if name is None or len(self.screen_stack) > 1:  # one editor at a time, from the main view
            return
        if any(w.group == rollout_group(name) and not w.is_finished for w in self.workers):
            self.notify(f"{name}: a flag change is already running", title="flags")
            return
        session = self.fleet.sessions[name]
        status = self.fleet.status.get(name)

        async def planner(changes: dict[str, FlagValue]) -> Plan:
            return await self.engine.run(prepare(session, changes))

        last_good = load_last_good(name)
        crashed = [c.flags for c in self.fleet.monitors[name].crashes if c.flags]
        # Without a last good configuration, the values running now are the baseline: a
        # value that crashed is one that differs from them (not every value of that run).
        baseline = last_good.values if last_good else (status.flags if status else None)
        history = flag_history(session.profile.flags, baseline, crashed, good=last_good is not None)
        editor = FlagEditorScreen(
            session.profile, status.flags if status else {}, planner, history=history
        )
        self.push_screen(editor, callback=self._flags_confirmed)

    async def action_quit(self) -> None:
        """Quitting mid-rollout would stop it between steps: ask for a second `q` first."""
        running = [
            w.description
            for w in self.workers
            if w.group.startswith("rollout:") and not w.is_finished
        ]
        now = time.monotonic()
        if running and now - self._quit_asked > QUIT_CONFIRM_S:
            self._quit_asked = now
            self.notify(
                f"a flag change is running ({'; '.join(running)}); quitting stops it half way "
                "— press q again to quit anyway",
                title="quit?",
                severity="warning",
                markup=False,
            )
            return
        self.exit()

    def _flags_confirmed(self, plan: Plan | None, kind: str = "change") -> None:
        if plan is None:
            return
        screen = RolloutScreen(plan, kind=kind)
        self._rollout_screens[plan.host] = screen
        self.push_screen(screen)
        self._start_rollout(plan, kind=kind)

    # --- history and rollback (the same diff, confirm and rollout as a flag change) -------

    def _rollback_refused(self, name: str) -> str | None:
        if self.read_only:
            return "read-only: rollbacks are disabled"
        if any(w.group == rollout_group(name) and not w.is_finished for w in self.workers):
            return f"{name}: a flag change is already running"
        return None

    def _rollback_planner(self, name: str, to: int | None, original: bool) -> RollbackPlanner:
        session = self.fleet.sessions[name]
        return lambda: self.engine.run(prepare_rollback(session, to=to, original=original))

    def _rollback_confirmed(self, plan: Plan | None) -> None:
        refused = self._rollback_refused(plan.host) if plan is not None else None
        if refused is not None:  # a change started meanwhile, from another screen
            self.notify(refused, title="rollback", severity="warning", markup=False)
        else:
            self._flags_confirmed(plan, "rollback")

    def action_show_history(self) -> None:
        name = self.selected_host
        if name is None or len(self.screen_stack) > 1:
            return
        session = self.fleet.sessions[name]
        screen = HistoryScreen(
            name,
            session.profile.service.unit,
            lambda: self.engine.run(read_host_history(session)),
            lambda to, original: self._rollback_planner(name, to, original),
            refused=lambda: self._rollback_refused(name),
        )
        self.push_screen(screen, callback=self._rollback_confirmed)

    def action_rollback(self) -> None:
        """`R`: back to the selected host's previous good configuration (its own history)."""
        name = self.selected_host
        if name is None or len(self.screen_stack) > 1:
            return
        refused = self._rollback_refused(name)
        if refused is not None:
            self.notify(refused, title="rollback", severity="warning", markup=False)
            return
        unit = self.fleet.profiles[name].service.unit
        planner = self._rollback_planner(name, None, False)
        what = "the previous good configuration"
        screen = RollbackConfirmScreen(name, unit, what, planner)
        self.push_screen(screen, callback=self._rollback_confirmed)

    # --- rollout -------------------------------------------------------------------------

    def _start_rollout(
        self,
        plan: Plan,
        *,
        kind: str = "change",
        source: str = "tui",
        done: concurrent.futures.Future[bool] | None = None,
    ) -> None:
        """Run a flag change on the engine as an app worker: it outlives its screen.

        `done` (a probation rollback's) learns whether it ended healthy."""
        host = plan.host

        def event(event: RolloutEvent) -> None:  # on the engine's thread
            self.post_message(RolloutUpdated(event))

        async def run() -> None:
            self.engine.call(self.left_on.hold, host)  # its own "started" entry is no finding
            try:
                await changing()
            finally:
                self.engine.call(self.left_on.release, host)

        async def changing() -> None:
            session = self.fleet.sessions[host]
            rollout = Rollout(session, plan, on_event=event, options=RolloutOptions(kind=kind))
            try:  # the run the change leaves, for the experiment ledger
                before: str | None = await self.engine.run(current_invocation(session))
            except (RemoteError, OSError):
                before = None
            started = utc_now()
            try:
                result = await self.engine.run(rollout.run())
            except Exception as exc:  # a bug must reach the operator, never vanish
                log.exception("%s: rollout crashed", host)
                self.notify(f"{host}: rollout stopped: {exc}", severity="error", markup=False)
                self._audit_action(plan, f"stopped: {exc}", kind)
                if done is not None:
                    done.set_result(False)
                return
            if done is not None:
                done.set_result(result.ok)
            self._audit_action(plan, result.summary(), kind)
            self.notify(
                outcome_text(result),
                title="rollback" if kind == "rollback" else "flag change",
                severity=OUTCOME_SEVERITY[result.outcome],
                timeout=NOTIFY_TIMEOUT_S,
                markup=False,
            )
            self.engine.call(self.fleet.refresh_status, host)
            self.engine.call(self.probation.reread, host)  # a kept change starts a probation
            try:
                recording = record_rollout(
                    session, plan, result, before_invocation=before, started=started, source=source
                )
                await self.engine.run(recording)
            except NotOnHost as exc:
                self.notify(f"experiment not in the host's ledger: {exc}", severity="warning")
            except (RemoteError, OSError) as exc:
                self.notify(f"{host}: experiment not recorded: {exc}", severity="warning")

        self.run_worker(
            run(),
            group=rollout_group(host),
            exit_on_error=False,
            description=f"{host}: {plan.summary()}",
        )

    def _audit_action(self, plan: Plan, outcome: str, kind: str = "change") -> None:
        if self.fleet.on_action is not None:
            action = "rollback" if kind == "rollback" else "flags"
            entry = action_record(plan.host, action, plan.summary(), outcome, plan.dropin)
            self.fleet.on_action(entry)

    # --- probation -----------------------------------------------------------------------

    async def _probation_rollback(self, session: HostSession, plan: Plan) -> bool:
        """On the engine: the probation rollback, shown and recorded like a flag change."""
        done: concurrent.futures.Future[bool] = concurrent.futures.Future()
        self.call_from_thread(self._show_rollout, plan, done)
        return await asyncio.wrap_future(done)

    def _show_rollout(self, plan: Plan, done: concurrent.futures.Future[bool]) -> None:
        screen = RolloutScreen(plan, kind="rollback")
        self._rollout_screens[plan.host] = screen
        self.push_screen(screen)
        self._start_rollout(plan, kind="rollback", source="probation", done=done)

    def _probation_posted(self, event: ProbationEvent) -> None:  # on the engine's thread
        self.post_message(ProbationUpdated(event))

    @on(ProbationUpdated)
    def _probation_event(self, message: ProbationUpdated) -> None:
        if banner := self.main(ProbationBanner):
            banner.show(message.event)
        note = probation_note(message.event)
        if note is not None:
            text, severity = note
            self.notify(text, title="probation", severity=severity, markup=False)

    def action_probation_cancel(self) -> None:
        """`x`: cancel the probation rollbacks counting down (they leave the hosts alone)."""
        self.engine.call(self.probation.cancel)

    @on(LeftOnUpdated)
    def _left_on_found(self, message: LeftOnUpdated) -> None:
        """A host a change did not finish on: an alert (`A`) and a notification naming what
        it is left on."""
        found = message.event
        self.left_ons.append(found)
        title = f"{found.host}: a change did not finish"
        self.notify(
            found.text(), title=title, severity="warning", timeout=NOTIFY_TIMEOUT_S, markup=False
        )

    @on(RolloutUpdated)
    def _rollout_event(self, message: RolloutUpdated) -> None:
        screen = self._rollout_screens.get(message.event.host)
        if screen is not None and screen.is_attached:  # events for a closed screen are dropped
            screen.show(message.event)


def _with_app_bindings(live: list[Binding], app: Iterable[Binding]) -> list[Binding]:
    """The screen's live bindings first, then app bindings that are shadowed or hidden."""
    seen = {(b.action, b.description) for b in live}
    return live + [b for b in app if (b.action, b.description) not in seen]


def _bindings(declared: Iterable[Binding | tuple[str, ...]]) -> list[Binding]:
    return [b for b in declared if isinstance(b, Binding)]
