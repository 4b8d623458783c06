"""The snapshot panel: each host's progress while `s`/`S` runs, then what the package gained.

Hidden until a snapshot starts; the summary stays until the next snapshot or `escape`.
"""

from __future__ import annotations

from collections.abc import Iterable

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual.widgets import Static

from console.hosts.events import SnapshotProgress, SnapshotStage
from console.package.manifest import MANIFEST_NAME
from console.package.snapshot import HostOutcome, SnapshotReport
from console.package.transfer import Outcome, human_size

STAGE_STYLE = {SnapshotStage.DONE: "green", SnapshotStage.FAILED: "red"}


def _bytes(event: SnapshotProgress) -> str:
    if not event.bytes_total:
        return ""
    return f"{human_size(event.bytes_done)} / {human_size(event.bytes_total)}"


class SnapshotPanel(Static):
    DEFAULT_CSS = """
    SnapshotPanel {
        display: none;
        height: auto;
        max-height: 16;
        border: round $accent;
        border-title-color: $text-accent;
        padding: 0 1;
    }
    SnapshotPanel.-active { display: block; }
    SnapshotPanel.-failed { border: round $error; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__("", id=id)
        self.rows: dict[str, SnapshotProgress] = {}
        self.report: SnapshotReport | None = None
        self.running = False

    def start(self, hosts: Iterable[str]) -> None:
        self.rows = {h: SnapshotProgress(h, SnapshotStage.CONNECTING) for h in hosts}
        self.report = None
        self.running = True
        self.border_title = f"snapshot · {', '.join(self.rows)}"
        self.set_class(True, "-active")
        self.set_class(False, "-failed")
        self.update(self._progress_table())

    def progress(self, event: SnapshotProgress) -> None:
        if event.host in self.rows:
            self.rows[event.host] = event
            self.update(self._progress_table())

    def finish(self, report: SnapshotReport | None, error: str | None = None) -> None:
        self.running = False
        self.report = report
        failed = report is None or not report.ok
        self.set_class(failed, "-failed")
        self.border_title = "snapshot · " + ("failed" if failed else "done")
        self.border_subtitle = "esc to hide"
        if report is None:
            self.update(Text(f"snapshot failed: {error}", style="red"))
        else:
            self.update(self._summary(report))

    def hide(self) -> None:
        self.set_class(False, "-active")

    def _progress_table(self) -> Table:
        table = Table("host", "stage", "files", "bytes", "now", box=None, expand=True)
        for event in self.rows.values():
            files = f"{event.files_done}/{event.files_total}" if event.files_total else ""
            stage = Text(event.stage.value, style=STAGE_STYLE.get(event.stage, ""))
            table.add_row(event.host, stage, files, _bytes(event), event.current)
        return table

    def _summary(self, report: SnapshotReport) -> RenderableType:
        table = Table("host", "result", *(o.value for o in Outcome), box=None, expand=True)
        notes: list[Text] = []
        for result in report.hosts:
            if result.outcome is HostOutcome.OK:
                counts = []
                for outcome in Outcome:
                    files, size = result.count(outcome)
                    counts.append(f"{files} ({human_size(size)})")
                table.add_row(result.host, Text("ok", style="green"), *counts)
            else:
                label = "UNREACHABLE" if result.outcome is HostOutcome.UNREACHABLE else "FAILED"
                table.add_row(result.host, Text(label, style="red"), "", "", "")
                notes.extend(Text(f"{result.host}: {e}", style="red") for e in result.errors)
            notes.extend(
                Text(f"{result.host}: kept both: {a.path}")
                for a in result.artifacts
                if a.outcome is Outcome.KEPT_BOTH
            )
            notes.extend(Text(f"{result.host}: note: {n}", style="dim") for n in result.notes)
        for package in report.packages:
            if package.error:
                notes.append(Text(f"{package.path}: {package.error}", style="red"))
            else:
                what = "updated" if package.manifest_updated else "unchanged"
                notes.append(Text(f"{package.path}: {MANIFEST_NAME} {what}, {package.files} files"))
        if any(not p.error for p in report.packages):
            notes.append(
                Text("r: write the findings report (REPORT.md) · b: bench results", style="bold")
            )
        return Group(table, *notes)
