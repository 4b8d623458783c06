"""`h`: the selected host's history, newest first, and rollbacks to any entry of it.

The history is the host's own (`/var/lib/specops/UNIT/history.json`, read by the engine over
the host's session, as `specops history` reads it): per entry its number, when, who, the flag
values it changed, the outcome and what its run measured, with the entry running now and the
last good one marked. `enter` rolls back to the highlighted entry (`specops rollback --to N`),
`o` to the unit's original (`--original`); each shows its diff and asks first
(widgets/rollback_confirm.py). The screen returns the confirmed `Plan`; the app runs it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from rich.text import Text
from textual import on, work
from textual.actions import SkipAction
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.widgets import DataTable, Static

from console.transport.ssh import RemoteError
from console.tuning.history import HistoryEntry, HistoryError
from console.tuning.history_rows import (
    OUTCOME_STYLE,
    HostHistory,
    changes_text,
    detail_lines,
    outcome_text,
    run_text,
    values_text,
    when_text,
)
from console.tuning.plan import Plan
from widgets.dialog import Dialog
from widgets.rollback_confirm import RollbackConfirmScreen, RollbackPlanner
from widgets.table_keys import CURSOR_BINDINGS, move_cursor

HistoryLoader = Callable[[], Awaitable[HostHistory]]
RollbackPlanners = Callable[[int | None, bool], RollbackPlanner]
"""(entry N or None, original?) → the planner of that rollback, run on the engine."""

COLUMNS = ("#", "", "outcome", "changes", "run", "when (UTC)", "who")
HINT = "enter roll back to it · o back to the original · r reload · escape close"


class HistoryScreen(Dialog["Plan | None"]):
    # Below 120 columns it takes the whole terminal: at 80 every column counts.
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (120, "-wide")]
    DEFAULT_CSS = """
    HistoryScreen { align: center middle; }
    HistoryScreen > Vertical {
        width: 95%; height: 90%; border: round $primary; background: $surface; padding: 0 1;
    }
    HistoryScreen.-narrow > Vertical { width: 100%; height: 100%; }
    HistoryScreen DataTable { height: 1fr; }
    HistoryScreen #history-status { height: auto; }
    HistoryScreen.-error #history-status { color: $error; }
    HistoryScreen #history-detail { height: auto; max-height: 7; color: $text-muted; }
    HistoryScreen .hint { color: $text-muted; }
    """
    BINDINGS = [
        # Priority: the table would take enter (select) before the screen sees it.
        Binding("enter", "rollback_to", "Roll back to it", id="history-rollback-to", priority=True),
        *CURSOR_BINDINGS,  # …so the cursor keys are too, or enter overtakes them
        Binding("o", "rollback_original", "Back to original", id="history-original"),
        Binding("r", "reload", "Reload", id="history-reload"),
        Binding("escape,h,q", "close", "Close", id="history-close"),
    ]

    def __init__(
        self,
        host: str,
        unit: str,
        loader: HistoryLoader,
        planners: RollbackPlanners,
        refused: Callable[[], str | None] = lambda: None,
    ) -> None:
        super().__init__()
        self.host = host
        self.unit = unit
        self.history: HostHistory | None = None
        self.error: str | None = None
        self._loader = loader
        self._planners = planners
        self._refused = refused
        """Why a rollback may not start now (read-only, a change running), or None."""

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(
                Text.assemble(("history · ", "bold"), (self.host, "bold"), f" · {self.unit}"),
                id="history-title",
            )
            yield Static("", id="history-status")
            table: DataTable[Text | str] = DataTable(
                cursor_type="row", zebra_stripes=True, id="history"
            )
            yield table
            yield Static("", id="history-detail")
            yield Static(HINT, id="history-hint", classes="hint")

    def on_mount(self) -> None:
        table: DataTable[Text | str] = self.query_one(DataTable)
        for column in COLUMNS:
            table.add_column(column, key=column or "marks")
        table.focus()
        self.action_reload()

    def _status(self, text: str, *, error: bool = False) -> None:
        self.set_class(error, "-error")
        self.query_one("#history-status", Static).update(Text(text))

    # --- loading -----------------------------------------------------------------------

    def action_reload(self) -> None:
        self._status(f"reading the history on {self.host} …")
        self._load()

    @work(exclusive=True, group="history-load", exit_on_error=False, description="history")
    async def _load(self) -> None:
        try:
            found = await self._loader()
        except (HistoryError, RemoteError) as exc:
            self.error = str(exc)
            self._status(f"cannot read the history of {self.host}: {exc}", error=True)
            return
        self.error = None
        self.history = found
        self._show(found)

    def _show(self, found: HostHistory) -> None:
        table: DataTable[Text | str] = self.query_one(DataTable)
        table.clear()
        entries = list(found.entries)
        for entry in found.newest_first:
            style = OUTCOME_STYLE.get(entry.outcome, "")
            table.add_row(
                str(entry.n),
                Text(found.marks(entry), style="bold"),
                Text(outcome_text(entry), style=style),
                changes_text(entries, entry),
                run_text(entry),
                when_text(entry),
                entry.who,
                key=str(entry.n),
            )
        if not entries:
            self._status(
                f"no history in {found.path}: specops never changed {self.unit} there "
                "(o: back to the unit's own configuration)"
            )
            return
        good, current = found.last_good, found.current
        now = f"now: entry {current.n}" if current is not None else "now: not in the history"
        last = f"last good: entry {good.n}" if good is not None else "no good entry"
        self._status(f"{now} · {last} · {len(entries)} entries in {found.path}")
        self._detail()

    # --- the highlighted entry -------------------------------------------------------------

    @property
    def selected(self) -> HistoryEntry | None:
        if self.history is None or not self.history.entries:
            return None
        table = self.query_one(DataTable)
        newest = self.history.newest_first
        if not 0 <= table.cursor_row < len(newest):
            return None
        return newest[table.cursor_row]

    @on(DataTable.RowHighlighted)
    def _detail(self) -> None:
        entry = self.selected
        lines = [f"values: {values_text(entry.values)}", *detail_lines(entry)] if entry else []
        self.query_one("#history-detail", Static).update(Text("\n".join(lines)))

    # --- rollbacks -----------------------------------------------------------------------

    def action_move_cursor(self, rows: int) -> None:
        table = self.query_one(DataTable)
        move_cursor(table, rows, focused=self.focused is table)

    def action_rollback_to(self) -> None:
        entry = self.selected
        if entry is None:
            raise SkipAction()
        self._confirm(f"history entry {entry.n}", entry.n, original=False)

    def action_rollback_original(self) -> None:
        self._confirm("the unit's original configuration", None, original=True)

    def _confirm(self, what: str, n: int | None, *, original: bool) -> None:
        refused = self._refused()
        if refused is not None:
            self.notify(refused, title="rollback", severity="warning", markup=False)
            return
        screen = RollbackConfirmScreen(self.host, self.unit, what, self._planners(n, original))
        self.app.push_screen(screen, callback=self._confirmed)

    def _confirmed(self, plan: Plan | None) -> None:
        if plan is not None:
            self.dismiss(plan)

    def action_close(self) -> None:
        self.dismiss(None)
