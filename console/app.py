"""The Textual app shell: `SpecopsApp` composes the widgets and the pieces in console/ui/.

With `console/ui/` and `widgets/`, the only code that imports Textual. The fleet is injected,
so the same app runs over real hosts, the demo's simulated fleet, and the tests' in-process
hosts. This module holds the keys, the layout and the app's life (mount, quit, unmount); each
concern the keys and the engine's events reach is a mixin in console/ui/, named for it.
"""

from __future__ import annotations

import gc
import os
import time
from collections import deque
from collections.abc import Sequence

# Textual paints a changed screen on its next frame tick, at most TEXTUAL_FPS (default 60)
# a second: a key's repaint waited up to 17 ms for the tick (keys p99 50 -> 39 ms at 240).
# It bounds latency, not work: frames are only drawn when something changed (under a
# flood 228 frames where 60 fps drew 200, for the same UI CPU). Read when Textual is first
# imported; an operator's own TEXTUAL_FPS wins.
os.environ.setdefault("TEXTUAL_FPS", "240")

from textual import events, on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.widgets import Footer, Header
from textual.worker import Worker, WorkerState

from console.fleet.fleet import Fleet
from console.local.settings import Settings
from console.tuning.left_on import LeftOnWatch
from console.tuning.probation import ProbationGuard
from console.ui.alerts import ALERTS_KEPT, Alerts
from console.ui.campaign_actions import CampaignActions
from console.ui.engine import EngineThread
from console.ui.engine_bridge import FLUSH_INTERVAL_S, EngineBridge
from console.ui.evidence_actions import EvidenceActions
from console.ui.fleet_table import FleetTable
from console.ui.group_actions import GroupActions
from console.ui.help_palette import HelpPalette
from console.ui.journal_keys import JournalKeys
from console.ui.monitoring import METRICS_INTERVAL_S, STATS_INTERVAL_S
from console.watch.journal import LineFilter
from widgets.accept_chart import MAX_ROWS as CHART_ROWS
from widgets.accept_chart import AcceptChart
from widgets.alerts import LeftOnUpdated
from widgets.host_table import HostTable
from widgets.journal_view import JournalView, PromptInput
from widgets.probation_banner import ProbationBanner
from widgets.snapshot_panel import SnapshotPanel
from widgets.stats_panel import StatsPanel

QUIT_CONFIRM_S = 5.0
GC_THRESHOLDS = (10_000, 50, 1000)
COMPACT_WIDTH, COMPACT_HEIGHT = 120, 34
COMPACT_CHART_ROWS = 3
"""Hosts the accept-length chart draws at most on a compact screen (CHART_ROWS otherwise):
the journal needs the room (at 80×24 ten chart lines left it none)."""
"""Below either, the stats panel folds away (`t` shows it) so the journal keeps its rows."""


class SpecopsApp(
    EngineBridge,
    FleetTable,
    JournalKeys,
    Alerts,
    EvidenceActions,
    GroupActions,
    CampaignActions,
    HelpPalette,
):
    CSS_PATH = "app.tcss"
    TITLE = "specops"

    BINDINGS = [
        Binding("q", "quit", "Quit", id="quit"),
        Binding("f", "edit_flags", "Flags", id="flags-edit"),
        Binding("space", "toggle_mark", "Mark", id="host-mark", show=False),
        Binding("M", "mark_shown", "Mark shown", id="hosts-mark-shown", show=False),
        Binding("h", "show_history", "History", id="history-view", show=False),
        Binding("R", "rollback", "Roll back", id="rollback", show=False),
        # priority: handled when it arrives, so the keys typed after it (one burst from tmux)
        # reach the campaign form instead of the journal (a letter in a text field, though).
        Binding("C", "campaign", "Campaign", id="campaign", show=False, priority=True),
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
        Binding("u", "show_gpus", "GPUs", id="gpus-view", show=False),
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
        self,
        fleet: Fleet,
        *,
        read_only: bool = False,
        settings: Settings | None = None,
        notes: Sequence[str] = (),
    ) -> None:
        super().__init__()
        self._notes = tuple(notes)
        """Said once the screen is up (inventory hosts that could not be used)."""
        self.settings = settings or Settings()
        self.fleet = fleet
        self.read_only = read_only or self.settings.read_only
        self._quit_asked = 0.0
        self._rollout_screens = {}
        self._group_screens = {}
        self._in_group_rollout = set()
        self._sweeps = {}
        self._campaign_screens = {}
        self.host_names = list(fleet.profiles)
        self._buffer_lines = self.settings.journal_lines
        self._stats_wanted: bool | None = None
        """The operator's `t` choice; None follows the terminal size."""
        self.crashes = deque(maxlen=ALERTS_KEPT)
        self._notified = {}
        self.engine = EngineThread()
        self._metrics_due = {}
        self._journal_numbers_at = {}
        self._remote_numbers_at = {}
        self._gpu_readings = {}
        self._kv_share = {}
        self._inbox = deque()
        self._inbox_added = 0
        self._inbox_taken = 0
        self._input_until = 0.0
        self._input_key = None
        self._main_widgets = {}
        self.probation = ProbationGuard(
            fleet.sessions,
            self._probation_posted,
            on_rollout=self._rollout_posted,
            source="tui",
            read_only="read-only console" if self.read_only else None,
            on_window=fleet.probation,
            clock=fleet.clock,
        )
        self.left_on = LeftOnWatch(fleet.sessions, lambda f: self.post_message(LeftOnUpdated(f)))
        self.left_ons = deque(maxlen=ALERTS_KEPT)
        self.xids = deque(maxlen=ALERTS_KEPT)

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
        yield ProbationBanner(clock=self.fleet.clock, id="probation")
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
        for note in self._notes:
            self.notify(note, severity="warning", timeout=30)
        if self.settings.keymap:
            self.set_keymap(self.settings.keymap)
        if self.read_only:
            self.sub_title = "read-only"
        self._start_engine()
        self.call_after_refresh(self._publish_on_screen)  # the first page opens at once
        if self.host_names:
            self.query_one(JournalView).show_host(self.host_names[0])
            self._show_stats()
        self.set_interval(FLUSH_INTERVAL_S, self._flush_journal)
        self.set_interval(STATS_INTERVAL_S, self._show_stats)
        self.set_interval(STATS_INTERVAL_S, self._draw_freshness)
        self.set_interval(METRICS_INTERVAL_S, self._draw_metrics)
        self.query_one(JournalView).focus()

    async def on_unmount(self) -> None:
        await self._stop_engine()
        gc.unfreeze()
        gc.set_threshold(*self._gc_thresholds)

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

    def action_toggle_stats(self) -> None:
        if stats := self.main(StatsPanel):
            self._stats_wanted = not stats.display
            stats.display = self._stats_wanted

    def on_resize(self, event: events.Resize) -> None:
        compact = event.size.width < COMPACT_WIDTH or event.size.height < COMPACT_HEIGHT
        self.screen_stack[0].set_class(compact, "-compact")
        if chart := self.main(AcceptChart):
            chart.set_rows(COMPACT_CHART_ROWS if compact else CHART_ROWS)
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
