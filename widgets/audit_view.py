"""`L`: the remote actions specops took (the audit log), newest last.

Actions (a flag change: intent and outcome) and the commands that changed or read
something; status polls are left out as in `specops audit` (`--all` shows them there).
"""

from __future__ import annotations

from collections import deque

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.widgets import DataTable, Static

from console.local.audit import ActionRecord, AuditLog, AuditRecord, is_poll
from widgets.dialog import Dialog

SHOWN = 500


class AuditScreen(Dialog[None]):
    DEFAULT_CSS = """
    AuditScreen { align: center middle; }
    AuditScreen > Vertical {
        width: 95%; height: 90%; border: round $primary; background: $surface; padding: 0 1;
    }
    AuditScreen DataTable { height: 1fr; }
    AuditScreen .hint { color: $text-muted; }
    """
    BINDINGS = [Binding("escape,L,q", "dismiss", "Close", id="audit-close")]

    def __init__(self, log: AuditLog | None = None) -> None:
        super().__init__()
        self.audit = log or AuditLog()
        entries = (
            e for e in self.audit.entries() if isinstance(e, ActionRecord) or not is_poll(e.command)
        )
        self.records: deque[AuditRecord | ActionRecord] = deque(entries, maxlen=SHOWN)

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(
                f"[b]remote actions[/b] — last {len(self.records)} of {self.audit.path}",
                markup=True,
            )
            table: DataTable[str] = DataTable(cursor_type="row", zebra_stripes=True)
            table.add_columns("time (UTC)", "host", "exit", "seconds", "command")
            for r in self.records:
                if isinstance(r, ActionRecord):
                    when = r.time.replace("T", " ")[:23]
                    table.add_row(when, r.host, r.action, "", f"{r.intent} → {r.outcome}")
                    continue
                table.add_row(
                    r.time.replace("T", " ")[:23],
                    r.host,
                    r.status.removeprefix("exit "),
                    f"{r.duration_s:.3f}",
                    r.command,
                )
            yield table
            yield Static("escape: close · `specops audit --json` for the full log", classes="hint")

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        if self.records:
            table.move_cursor(row=len(self.records) - 1)
