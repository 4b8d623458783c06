"""The Textual app shell: composes widgets and turns engine events into messages.

With `widgets/`, the only code that imports Textual. The fleet is injected, so the same app
runs over real hosts, the demo's simulated fleet, and the tests' in-process hosts.
"""

from __future__ import annotations

from textual import on, work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.widgets import DataTable, Footer, Header

from console.events import Event, HostStateChanged, JournalBatch, ServiceStatus, SnapshotProgress
from console.fleet import Fleet
from console.package import Job, SnapshotError, plan
from console.snapshot import run_snapshot
from widgets.host_table import HostTable
from widgets.journal_view import JournalView
from widgets.messages import (
    HostStateUpdated,
    JournalReceived,
    ServiceStatusUpdated,
    SnapshotFinished,
    SnapshotProgressed,
)
from widgets.snapshot_panel import SnapshotPanel

FLUSH_INTERVAL_S = 0.05


class SpecopsApp(App[int]):
    CSS_PATH = "app.tcss"
    TITLE = "specops"

    BINDINGS = [
        Binding("q", "quit", "Quit", id="quit"),
        Binding("tab", "next_host", "Next host", id="next-host", show=False),
        Binding("s", "snapshot_host", "Snapshot", id="snapshot-host"),
        Binding("S", "snapshot_all", "Snapshot all", id="snapshot-all"),
        Binding("escape", "hide_snapshot", "Hide snapshot", id="snapshot-hide", show=False),
        *[
            Binding(str(i), f"select_index({i})", f"Host {i}", id=f"host-{i}", show=False)
            for i in range(1, 10)
        ],
    ]

    def __init__(self, fleet: Fleet, *, read_only: bool = False) -> None:
        super().__init__()
        self.fleet = fleet
        self.read_only = read_only
        self.host_names = list(fleet.profiles)
        buffer = max((p.journal.buffer_lines for p in fleet.profiles.values()), default=5000)
        self._buffer_lines = buffer

    def compose(self) -> ComposeResult:
        yield Header()
        yield HostTable(self.host_names, id="hosts")
        yield JournalView(self._buffer_lines, id="journal")
        yield SnapshotPanel(id="snapshot")
        yield Footer()

    def on_mount(self) -> None:
        if self.read_only:
            self.sub_title = "read-only"
        self.fleet.listen(self._forward)
        self.fleet.start()
        if self.host_names:
            self.query_one(JournalView).show_host(self.host_names[0])
        self.set_interval(FLUSH_INTERVAL_S, self._flush_journal)

    async def on_unmount(self) -> None:
        await self.fleet.stop()

    def _forward(self, event: Event) -> None:
        if isinstance(event, HostStateChanged):
            self.post_message(HostStateUpdated(event))
        elif isinstance(event, ServiceStatus):
            self.post_message(ServiceStatusUpdated(event))
        elif isinstance(event, JournalBatch):
            self.post_message(JournalReceived(event))

    def _flush_journal(self) -> None:
        for view in self.query(JournalView):  # none while the app is shutting down
            view.flush()

    @on(HostStateUpdated)
    def _host_state(self, message: HostStateUpdated) -> None:
        self.query_one(HostTable).set_state(message.event.state)

    @on(ServiceStatusUpdated)
    def _service_status(self, message: ServiceStatusUpdated) -> None:
        self.query_one(HostTable).set_status(message.event)

    @on(JournalReceived)
    def _journal(self, message: JournalReceived) -> None:
        batch = message.event
        self.query_one(JournalView).add(batch.host, (e.message for e in batch.entries))

    @on(DataTable.RowHighlighted, "#hosts")
    def _row_highlighted(self, message: DataTable.RowHighlighted) -> None:
        if message.row_key.value is not None:
            self.query_one(JournalView).show_host(str(message.row_key.value))

    def action_select_index(self, index: int) -> None:
        if 1 <= index <= len(self.host_names):
            self.query_one(HostTable).move_cursor(row=index - 1)

    def action_next_host(self) -> None:
        table = self.query_one(HostTable)
        if self.host_names:
            table.move_cursor(row=(table.cursor_row + 1) % len(self.host_names))

    # --- snapshot ------------------------------------------------------------------------

    def action_snapshot_host(self) -> None:
        table = self.query_one(HostTable)
        if self.host_names:
            self._snapshot([self.host_names[table.cursor_row]])

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
            report = await run_snapshot(pairs, progressed)
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
