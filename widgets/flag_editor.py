"""`f`: the selected host's flags — current values, edit, review the diff, confirm.

Nothing leaves this screen until the operator has seen the diff the engine computed from
the host's effective unit (and, when the profile asks, checked against the build's
`--help`) and pressed `y`. Values are validated as they are typed, with the same rules the
CLI uses, so a bad value never reaches the review step. The screen returns the `Plan`;
the app runs it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping

from rich.markup import escape
from rich.text import Text
from textual import on, work
from textual.actions import SkipAction
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.widgets import DataTable, Input, Static

from console.hosts.profiles import FlagValue, Profile
from console.service.execline import FlagError
from console.service.flags import format_value, validate_value
from console.transport.ssh import RemoteError
from console.tuning.group_plan import GroupPlan, GroupRefused
from console.tuning.plan import Plan
from widgets.dialog import Dialog
from widgets.ordered_input import OrderedInput, drained
from widgets.table_keys import CURSOR_BINDINGS, move_cursor

Planner = Callable[[dict[str, FlagValue]], Awaitable["Plan | GroupPlan"]]
"""The plan of the values typed: one host's, or the marked hosts' (console/ui/group_actions.py)."""

HINT_TABLE = "enter edit · space toggle a switch · x revert · d review diff · escape close"
HINT_EDIT = "enter keep · escape cancel · 'unset' removes a flag"
HINT_REVIEW = "y apply and restart · escape back to the values"


def diff_text(diff: str) -> Text:
    text = Text()
    for line in diff.splitlines():
        style = ""
        if line.startswith(("+++", "---")):
            style = "bold"
        elif line.startswith("+"):
            style = "green"
        elif line.startswith("-"):
            style = "red"
        elif line.startswith("@"):
            style = "cyan"
        text.append(line + "\n", style=style)
    return text


class FlagEditorScreen(Dialog["Plan | GroupPlan | None"]):
    DEFAULT_CSS = """
    FlagEditorScreen { align: center middle; }
    FlagEditorScreen > Vertical {
        width: 110; max-width: 100%; height: auto; max-height: 95%;
        border: round $primary; background: $surface; padding: 0 1;
    }
    FlagEditorScreen DataTable { height: auto; max-height: 14; }
    FlagEditorScreen Input { display: none; }
    FlagEditorScreen.-editing Input { display: block; }
    FlagEditorScreen #flag-diff { display: none; height: auto; max-height: 22; }
    FlagEditorScreen.-review #flag-diff { display: block; }
    FlagEditorScreen.-review DataTable { display: none; }
    FlagEditorScreen #flag-error { color: $error; height: auto; }
    FlagEditorScreen .hint { color: $text-muted; }
    """
    BINDINGS = [
        # A priority binding: keys typed right after enter (tmux delivers them in one read)
        # reach the value field only if it has focus before they are dispatched; from the
        # table's own RowSelected message that came one message too late (`16` became `1`).
        Binding("enter", "edit_selected", "Edit", id="flags-edit-value", priority=True),
        *CURSOR_BINDINGS,  # …so the cursor keys are too, or enter overtakes them
        Binding("escape", "back", "Back", id="flags-back"),
        Binding("space", "toggle_switch", "Toggle", id="flags-toggle"),
        Binding("x", "revert", "Revert", id="flags-revert"),
        Binding("d", "review", "Diff", id="flags-review"),
        Binding("y", "apply", "Apply", id="flags-apply"),
    ]

    def __init__(
        self,
        profile: Profile,
        values: Mapping[str, FlagValue],
        planner: Planner,
        history: Mapping[str, str] | None = None,
        title: str | None = None,
    ) -> None:
        """`title`: what the change goes to when it is not the profile's host alone (the
        marked hosts; their values are the first one's)."""
        super().__init__()
        self.profile = profile
        self.title_text = title or self.profile.name
        self.history = dict(history or {})
        """Per flag: `good 8 · crashed 16` (console/tuning/flag_history.py)."""
        self.current = dict(values)
        self.pending: dict[str, FlagValue] = {}
        self.plan: Plan | GroupPlan | None = None
        self._planner = planner
        self._editing: str | None = None

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(
                f"[b]flags · {escape(self.title_text)}[/b] · {self.profile.service.unit}",
                id="flag-title",
            )
            table: DataTable[str] = DataTable(cursor_type="row", zebra_stripes=True, id="flags")
            yield table
            yield OrderedInput(id="flag-input")
            yield Static("", id="flag-error")
            with VerticalScroll(id="flag-diff"):
                yield Static("", id="flag-diff-text")
            yield Static(HINT_TABLE, id="flag-hint", classes="hint")

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        for column in ("flag", "current", "new", "history", "type", "help"):
            table.add_column(column, key=column)
        for name, spec in self.profile.flags.items():
            current = format_value(self.current.get(name))
            history = self.history.get(name, "")
            table.add_row(name, current, "", history, spec.type, spec.help, key=name)
        table.focus()

    def show_history(self, history: Mapping[str, str]) -> None:
        """The per-flag history, once the host's history was read (the editor opens first)."""
        self.history = dict(history)
        if not self.is_mounted:
            return  # on_mount shows it
        table: DataTable[str] = self.query_one(DataTable)
        for name in self.profile.flags:
            if name in table.rows:
                table.update_cell(name, "history", self.history.get(name, ""), update_width=True)

    # --- state -------------------------------------------------------------------------

    @property
    def selected(self) -> str | None:
        table = self.query_one(DataTable)
        names = list(self.profile.flags)
        if not names or not 0 <= table.cursor_row < len(names):
            return None
        return names[table.cursor_row]

    def _error(self, message: str) -> None:
        self.query_one("#flag-error", Static).update(Text(message))

    def _hint(self, text: str) -> None:
        self.query_one("#flag-hint", Static).update(text)

    def _set_pending(self, name: str, value: FlagValue) -> None:
        if value == self.current.get(name):
            self.pending.pop(name, None)
        else:
            self.pending[name] = value
        shown = format_value(value) if name in self.pending else ""
        self.query_one(DataTable).update_cell(name, "new", shown, update_width=True)
        self._leave_review()

    def _leave_review(self) -> None:
        self.plan = None
        if self.has_class("-review"):
            self.remove_class("-review")
            self.set_focus(self.query_one(DataTable))
        self._hint(HINT_TABLE)

    # --- editing -----------------------------------------------------------------------

    def action_move_cursor(self, rows: int) -> None:
        table = self.query_one(DataTable)
        move_cursor(table, rows, focused=self._editing is None and self.focused is table)

    async def action_edit_selected(self) -> None:
        if self._editing is not None:  # enter in the value field: keep the value
            field = self.query_one(OrderedInput)
            await drained(field)  # the keys typed before enter are in it; those after are not
            self._keep(field.value)
            return
        name = self.selected
        if name is None or self.focused is not self.query_one(DataTable):
            raise SkipAction()  # nothing to edit
        self._edit(name)

    @on(DataTable.RowSelected)
    def _row_selected(self, message: DataTable.RowSelected) -> None:
        name = str(message.row_key.value)
        if self._editing != name:  # a click: enter was handled by the binding already
            self._edit(name)

    def _edit(self, name: str) -> None:
        self._editing = name
        value = self.pending.get(name, self.current.get(name))
        field = self.query_one(Input)
        field.value = "" if value is None else format_value(value)
        field.placeholder = f"{name} ({self.profile.flags[name].type})"
        self.add_class("-editing")
        self._error("")
        self._hint(HINT_EDIT)
        self.set_focus(field)  # now, not after the keys already on their way

    def _keep(self, text: str) -> None:
        """The value typed, validated, as the flag's new value (the table has focus again)."""
        name = self._editing
        if name is None:
            return
        try:
            value = validate_value(name, self.profile.flags[name], text)
        except FlagError as exc:
            self._error(str(exc))
            return
        self._stop_editing()
        self._set_pending(name, value)

    def _stop_editing(self) -> None:
        self._editing = None
        self.remove_class("-editing")
        self._error("")
        self._hint(HINT_TABLE)
        self.set_focus(self.query_one(DataTable))  # now: the keys on their way go there

    def action_toggle_switch(self) -> None:
        name = self.selected
        if name is None or self._editing is not None:
            return
        if self.profile.flags[name].type != "switch":
            self._error(f"{name} is not a switch: press enter to edit it")
            return
        value = self.pending.get(name, self.current.get(name))
        self._error("")
        self._set_pending(name, not bool(value))

    def action_revert(self) -> None:
        name = self.selected
        if name is not None and self._editing is None and name in self.pending:
            self._set_pending(name, self.current.get(name))

    # --- review and confirm ------------------------------------------------------------

    def action_review(self) -> None:
        if self._editing is not None:
            return
        if not self.pending:
            self._error("nothing to review: no value was changed")
            return
        self._error("")
        self._hint("reading the unit and checking the build's flags …")
        self._make_plan(dict(self.pending))

    @work(exclusive=True, group="flag-plan", exit_on_error=False, description="plan a change")
    async def _make_plan(self, changes: dict[str, FlagValue]) -> None:
        try:
            plan = await self._planner(changes)
        except (FlagError, RemoteError, GroupRefused) as exc:
            self._hint(HINT_TABLE)
            self._error(str(exc))
            return
        if changes != self.pending:  # edited again while the plan was being made
            return
        for name, value in plan.old_values.items():  # fresh from the unit just read
            if name in self.profile.flags:
                self.current[name] = value
                table = self.query_one(DataTable)
                table.update_cell(name, "current", format_value(value), update_width=True)
        if not plan.changed:
            self._hint(HINT_TABLE)
            self._error(f"no change: {plan.summary()}")
            return
        self.plan = plan
        self.query_one("#flag-diff-text", Static).update(diff_text(plan.diff))
        # The values make room for the diff, which scrolls (↑ ↓) in what the screen leaves
        # it: at 80×24 its end and the `y` hint fell below the view.
        diff = self.query_one("#flag-diff", VerticalScroll)
        diff.styles.max_height = max(4, self.app.size.height - 8)
        self.add_class("-review")
        self.set_focus(diff)
        self._hint(f"{plan.summary()} — {HINT_REVIEW}")

    def action_apply(self) -> None:
        if self.plan is not None and self.has_class("-review"):
            self.dismiss(self.plan)

    def action_back(self) -> None:
        if self._editing is not None:
            self._stop_editing()
        elif self.has_class("-review"):
            self._leave_review()
        else:
            self.dismiss(None)
