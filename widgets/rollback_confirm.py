"""A rollback's diff and its confirmation: the flag editor's review step, for a rollback.

The engine works out the target from the host's own history (console/tuning/rollback.py,
as `specops rollback` does) and the diff against the effective unit; nothing changes until
the operator has seen it and pressed `y`. The screen returns the `Plan`; the app runs it
through the same verified rollout as a flag change.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.widgets import Static

from console.service.execline import FlagError
from console.transport.ssh import RemoteError
from console.tuning.history import HistoryError
from console.tuning.plan import Plan
from console.tuning.rollback import RollbackError, RollbackPlan
from widgets.dialog import Dialog
from widgets.flag_editor import diff_text

RollbackPlanner = Callable[[], Awaitable[RollbackPlan]]
HINT_LOADING = "reading the unit and the host's history … · escape cancel"
HINT_CLOSE = "escape close"
HINT_CONFIRM = "y apply and restart · escape cancel"


class RollbackConfirmScreen(Dialog["Plan | None"]):
    DEFAULT_CSS = """
    RollbackConfirmScreen { align: center middle; }
    RollbackConfirmScreen > Vertical {
        width: 110; max-width: 100%; height: auto; max-height: 95%;
        border: round $warning; background: $surface; padding: 0 1;
    }
    RollbackConfirmScreen #rollback-diff { height: auto; max-height: 22; margin-top: 1; }
    RollbackConfirmScreen #rollback-error { color: $error; height: auto; }
    RollbackConfirmScreen .hint { color: $text-muted; }
    """
    BINDINGS = [
        Binding("y", "apply", "Apply", id="rollback-apply"),
        Binding("escape", "cancel", "Cancel", id="rollback-cancel"),
    ]

    def __init__(self, host: str, unit: str, what: str, planner: RollbackPlanner) -> None:
        super().__init__()
        self.host = host
        self.unit = unit
        self.what = what
        """`the previous good configuration`, `history entry 3`, `the unit's original`."""
        self.plan: Plan | None = None
        self._planner = planner

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(
                Text.assemble(("rollback · ", "bold"), (self.host, "bold"), f" · {self.unit}"),
                id="rollback-title",
            )
            yield Static(Text(f"to {self.what}"), id="rollback-target")
            yield Static("", id="rollback-error")
            # Above the diff: a long one must never push the keys off a small terminal.
            yield Static(HINT_LOADING, id="rollback-hint", classes="hint")
            with VerticalScroll(id="rollback-diff"):
                yield Static("", id="rollback-diff-text")

    def on_mount(self) -> None:
        self._make_plan()

    def _hint(self, text: str) -> None:
        self.query_one("#rollback-hint", Static).update(Text(text))

    @work(exclusive=True, group="rollback-plan", exit_on_error=False, description="plan")
    async def _make_plan(self) -> None:
        try:
            found = await self._planner()
        except (RollbackError, HistoryError, FlagError, RemoteError) as exc:
            self.query_one("#rollback-error", Static).update(Text(str(exc)))
            self._hint(HINT_CLOSE)
            return
        target = self.query_one("#rollback-target", Static)
        target.update(Text(found.label))
        plan = found.plan
        if not plan.changed:
            error = self.query_one("#rollback-error", Static)
            error.update(Text(f"already on that configuration ({plan.summary()})"))
            self._hint(HINT_CLOSE)
            return
        self.plan = plan
        self.query_one("#rollback-diff-text", Static).update(diff_text(plan.diff))
        self._hint(f"{plan.summary()} — {HINT_CONFIRM}")

    def action_apply(self) -> None:
        if self.plan is not None:
            self.dismiss(self.plan)

    def action_cancel(self) -> None:
        self.dismiss(None)
