"""A flag change as it happens: each step on the left, the new invocation's journal beside it.

The screen only shows a stream of rollout events: the App starts the rollout (as it starts
snapshots) on the engine and hands each event to `show`. Closing this screen (escape) never
stops a restart half way; the outcome also arrives as a notification, wherever the operator is.
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.notifications import SeverityLevel
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static

from console.hosts.events import (
    RolloutEvent,
    RolloutFinished,
    RolloutJournal,
    RolloutOutcome,
    RolloutProgress,
)
from console.tuning.plan import Plan
from widgets.journal_view import display_line
from widgets.line_log import LineLog

STATE_STYLE = {
    "running": "yellow",
    "waiting": "yellow",
    "ok": "green",
    "failed": "bold red",
    "skipped": "dim",
}
OUTCOME_SEVERITY: dict[RolloutOutcome, SeverityLevel] = {
    RolloutOutcome.APPLIED: "information",
    RolloutOutcome.ROLLED_BACK: "warning",
    RolloutOutcome.FAILED: "error",
}


class RolloutUpdated(Message):
    """A rollout's domain event, posted to the App from the engine's thread."""

    def __init__(self, event: RolloutEvent) -> None:
        super().__init__()
        self.event = event


def rollout_group(host: str) -> str:
    return f"rollout:{host}"


def outcome_text(result: RolloutFinished) -> str:
    if result.outcome is RolloutOutcome.APPLIED:
        accept = f", accept len {result.accept_len:.2f}" if result.accept_len is not None else ""
        soaked = f", stayed up {result.soaked_s:g}s" if result.soaked_s else ""
        return f"{result.host}: applied; healthy{accept}{soaked}"
    if result.outcome is RolloutOutcome.ROLLED_BACK:
        return f"{result.host}: rolled back — {result.reason}"
    extra = f" ({result.rollback_error})" if result.rollback_error else ""
    return f"{result.host}: FAILED — {result.reason}{extra}"


class ClosesWhenEnded(Screen[None]):
    """Escape closes a rollout's screen, never the rollout; its footer says the rollout goes
    on only while it does (`ended`, then `refresh_bindings()`)."""

    @property
    def ended(self) -> bool:
        raise NotImplementedError

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "close":
            return not self.ended
        if action == "close_ended":
            return self.ended
        return True

    def action_close(self) -> None:
        self.dismiss(None)

    def action_close_ended(self) -> None:
        self.dismiss(None)


class RolloutScreen(ClosesWhenEnded):
    # Below 120 columns the steps take the whole width (their details read "healthy afte"
    # beside the journal at 80) and the journal goes under them.
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (120, "-wide")]
    DEFAULT_CSS = """
    RolloutScreen.-narrow > Horizontal { layout: vertical; }
    RolloutScreen.-narrow #rollout-steps { width: 1fr; height: auto; max-height: 60%; }
    RolloutScreen.-narrow #rollout-steps DataTable { height: auto; }
    RolloutScreen #rollout-title { height: auto; padding: 0 1; }
    RolloutScreen #rollout-steps { width: 1fr; height: 1fr; border: round $primary-background; }
    RolloutScreen #rollout-journal { width: 1fr; height: 1fr; border: round $primary-background; }
    RolloutScreen #rollout-outcome { height: auto; padding: 0 1; }
    RolloutScreen.-applied #rollout-outcome { color: $success; }
    RolloutScreen.-rolled-back #rollout-outcome { color: $warning; }
    RolloutScreen.-failed #rollout-outcome { color: $error; }
    """
    BINDINGS = [
        Binding("escape", "close", "Close (the rollout goes on)", id="rollout-close"),
        Binding("escape", "close_ended", "Close", id="rollout-close-ended"),
    ]

    def __init__(self, plan: Plan, kind: str = "change") -> None:
        """`kind`: "change" or "rollback" (an operator's or probation's), for the title."""
        super().__init__()
        self.plan = plan
        self.kind = kind
        """"change" (the flag editor) or "rollback" (`R`, the history view)."""
        self.result: RolloutFinished | None = None
        self._invocation: str | None = None
        self._early: list[RolloutEvent] | None = []
        """Events that came before the screen was mounted (a probation rollback's first
        steps follow its screen at once); shown on mount. None once mounted."""

    def compose(self) -> ComposeResult:
        title = Text.assemble((self.plan.host, "bold"), f" · {self.plan.unit} · ")
        if self.kind == "rollback":
            title = Text.assemble(("rollback · ", "bold"), title)
        title.append(self.plan.summary())
        yield Static(title, id="rollout-title")
        with Horizontal():
            with Vertical(id="rollout-steps"):
                yield DataTable(cursor_type="none", id="rollout-table")
            yield LineLog(max_lines=5000, id="rollout-journal")
        yield Static("applying …", id="rollout-outcome")
        yield Footer()

    def on_mount(self) -> None:
        table: DataTable[Text | str] = self.query_one("#rollout-table", DataTable)
        for column in ("step", "state", "detail"):
            table.add_column(column, key=column)
        self.query_one("#rollout-steps").border_title = "steps"
        self.query_one(LineLog).border_title = "journal of the new invocation"
        early, self._early = self._early or [], None
        for event in early:
            self.show(event)

    def show(self, event: RolloutEvent) -> None:
        """One event of this screen's rollout (the App hands it over, on the UI thread)."""
        if self._early is not None:
            self._early.append(event)
            return
        if isinstance(event, RolloutProgress):
            self._progress(event)
        elif isinstance(event, RolloutJournal):
            journal = self.query_one(LineLog)
            if event.invocation != self._invocation:
                if self._invocation is not None:  # the rollback's invocation follows
                    journal.write_line(f"── invocation {event.invocation} (rollback) ──")
                self._invocation = event.invocation
            journal.write_lines([display_line(line) for line in event.lines])
        elif isinstance(event, RolloutFinished):
            self._finished(event)

    def _progress(self, event: RolloutProgress) -> None:
        table: DataTable[Text | str] = self.query_one("#rollout-table", DataTable)
        key = f"{'rollback:' if event.rollback else ''}{event.step.value}"
        label = f"rollback: {event.step.value}" if event.rollback else event.step.value
        state = Text(event.state, style=STATE_STYLE.get(event.state, ""))
        if key in table.rows:
            table.update_cell(key, "state", state)
            table.update_cell(key, "detail", event.detail, update_width=True)
        else:
            table.add_row(label, state, event.detail, key=key)
        table.move_cursor(row=table.get_row_index(key))

    def _finished(self, result: RolloutFinished) -> None:
        self.result = result
        self.refresh_bindings()
        self.set_class(result.outcome is RolloutOutcome.APPLIED, "-applied")
        self.set_class(result.outcome is RolloutOutcome.ROLLED_BACK, "-rolled-back")
        self.set_class(result.outcome is RolloutOutcome.FAILED, "-failed")
        self.query_one("#rollout-outcome", Static).update(
            Text(outcome_text(result) + " · escape to close")
        )

    @property
    def ended(self) -> bool:
        return self.result is not None
