"""The evidence keys: snapshot the selected host or every host (`s`, `S`), read its bench
results (`b`) and its configurations side by side (`c`), and write the findings report
(`r`). The work runs on the engine (or a thread, for the report); the panels show it."""

from __future__ import annotations

from pathlib import Path

from textual import on, work

from console.findings.host_bench import HostBench, read_host_bench
from console.findings.report import write_report
from console.hosts.events import SnapshotProgress
from console.ledger.ledger import Experiment, read_ledger
from console.package.layout import Job, SnapshotError, package_dir, plan
from console.package.snapshot import run_snapshot
from console.ui.shell import Shell
from widgets.bench_view import BenchScreen
from widgets.compare_view import CompareScreen
from widgets.messages import SnapshotFinished, SnapshotProgressed
from widgets.snapshot_panel import SnapshotPanel


class EvidenceActions(Shell):
    """Snapshots into the package, and the findings read back from it and from the host."""

    def action_snapshot_host(self) -> None:
        if (name := self.selected_host) is not None:
            self._snapshot([name])

    def action_snapshot_all(self) -> None:
        self._snapshot(self.host_names)

    def action_hide_snapshot(self) -> None:
        panel = self.main(SnapshotPanel)
        if panel is not None and not panel.running:
            panel.hide()

    def _snapshot(self, names: list[str]) -> None:
        panel = self.main(SnapshotPanel)
        if panel is None:  # the app is closing
            return
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

        names = [job.profile.name for job in jobs]
        try:
            report = await self.on_hosts(names, lambda: run_snapshot(pairs, progressed), "snapshot")
        except Exception as exc:
            self.post_message(SnapshotFinished(None, f"{type(exc).__name__}: {exc}"))
            raise
        self.post_message(SnapshotFinished(report))

    # The panel is the main screen's: with a modal on top (help, the flag editor) or the app
    # closing, `query_one` found none and the finished snapshot crashed the app.
    @on(SnapshotProgressed)
    def _snapshot_progress(self, message: SnapshotProgressed) -> None:
        if panel := self.main(SnapshotPanel):
            panel.progress(message.event)

    @on(SnapshotFinished)
    def _snapshot_finished(self, message: SnapshotFinished) -> None:
        if panel := self.main(SnapshotPanel):
            panel.finish(message.report, message.error)

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
            return await self.on_hosts([name], lambda: read_host_bench(session), "bench")

        self.push_screen(BenchScreen(package, name, read_host))

    def action_show_compare(self) -> None:
        name = self.selected_host
        if name is None or len(self.screen_stack) != 1:
            return
        session = self.fleet.sessions[name]

        async def read() -> tuple[list[Experiment], str]:
            return await self.on_hosts([name], lambda: read_ledger(session), "ledger")

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
