"""`C`: set up a tuning campaign on the selected host — the grid, the soak and measurement
windows, the end state — see its plan (cells, estimated time), and start it with `y`.

Values are checked as the CLI checks them (`specops sweep`): a flag the profile does not
have, a bad value or a bad number is named here and nothing reaches the host. The plan is
made by the engine (what the host runs now becomes the starting configuration, and another
console's campaign on the host refuses it). The screen returns the campaign and one cell's
estimated seconds; the app runs it.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable

from rich.markup import escape
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Checkbox, Input, Static

from console.hosts.profiles import FlagValue, Profile
from console.ledger.campaigns import Campaign, CampaignError, cell_text
from console.service.execline import FlagError
from console.service.flags import format_value
from console.transport.ssh import RemoteError
from console.tuning import campaign as grids
from console.tuning.campaign_start import CampaignOptions, remaining_s
from console.tuning.history import HistoryError
from widgets.dialog import Dialog
from widgets.ordered_input import OrderedInput

CampaignPlanner = Callable[
    [dict[str, list[FlagValue]], CampaignOptions], Awaitable[tuple[Campaign, float]]
]
Prepared = tuple[Campaign, float]

HINT_FORM = "enter plan the campaign · tab next field · escape close"
HINT_REVIEW = "y start the campaign · escape back to the form"
DEFAULT_MEASURE_S = 60.0


class FieldError(ValueError):
    """A field's value is refused: `field` is its id, the message says why."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def seconds(text: str, what: str, *, allow_zero: bool) -> float:
    """A window in seconds from a field (ValueError naming the field and the value)."""
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{what} {text!r}: not a number of seconds") from None
    if not math.isfinite(value) or value < 0 or (value == 0 and not allow_zero):
        bound = "0 or more" if allow_zero else "more than 0"
        raise ValueError(f"{what} {text!r}: must be {bound} seconds")
    return value


def plan_text(campaign: Campaign, per_cell: float) -> Text:
    """The cells, where it starts and ends, and how long it should take."""
    minutes = remaining_s(campaign, per_cell) / 60
    end = "the fastest cell" if campaign.keep == "best" else "the configuration it started on"
    lines = [
        f"[b]{len(campaign.cells)} cells[/b], about {minutes:.0f} min "
        f"(~{per_cell:.0f}s a cell: restart, soak, {campaign.measure_s:g}s measured)",
        f"starts from [cyan]{escape(cell_text(campaign.start))}[/cyan]",
        f"ends on {end}",
    ]
    lines += [f"  {n:>3}  {escape(cell_text(c.values))}" for n, c in enumerate(campaign.cells, 1)]
    return Text.from_markup("\n".join(lines))


class FormField(OrderedInput):
    """A field of the campaign form: enter hands the form over at once, in turn with the
    keys (a Submitted message would be read after the keys that followed it)."""

    async def action_submit(self) -> None:
        if isinstance(self.screen, CampaignSetupScreen):
            self.screen.submit()


class CampaignSetupScreen(Dialog["Prepared | None"]):
    DEFAULT_CSS = """
    CampaignSetupScreen { align: center middle; }
    CampaignSetupScreen > Vertical {
        width: 100; max-width: 100%; height: auto; max-height: 95%;
        border: round $primary; background: $surface; padding: 0 1;
    }
    CampaignSetupScreen Horizontal { height: auto; }
    CampaignSetupScreen Horizontal Input { width: 1fr; }
    CampaignSetupScreen #campaign-error { color: $error; height: auto; }
    CampaignSetupScreen #campaign-plan { display: none; height: auto; max-height: 20; }
    CampaignSetupScreen.-review #campaign-plan { display: block; }
    CampaignSetupScreen .hint { color: $text-muted; }
    """
    BINDINGS = [
        Binding("escape", "back", "Back", id="campaign-back"),
        Binding("y", "start", "Start", id="campaign-start"),
    ]

    def __init__(self, profile: Profile, planner: CampaignPlanner) -> None:
        super().__init__()
        self.profile = profile
        self.prepared: Prepared | None = None
        self._planner = planner

    def compose(self) -> ComposeResult:
        flags = ", ".join(self.profile.flags)
        with Vertical():
            yield Static(
                f"[b]campaign · {escape(self.profile.name)}[/b] · {self.profile.service.unit}"
            )
            yield Static(Text(f"flags: {flags}"), classes="hint")
            yield FormField(placeholder="grid: budget=4,8,16 cuda_graph=true,false", id="grid")
            with Horizontal():
                soak = format_value(self.profile.service.soak_s)
                yield FormField(placeholder=f"soak s (empty: {soak})", id="soak")
                measure = f"{DEFAULT_MEASURE_S:g}"
                yield FormField(value=measure, placeholder="measure s", id="measure")
            yield Checkbox("end on the fastest cell (not where it started)", id="keep-best")
            yield Static("", id="campaign-error")
            with VerticalScroll(id="campaign-plan"):
                yield Static("", id="campaign-plan-text")
            yield Static(HINT_FORM, id="campaign-hint", classes="hint")

    def on_mount(self) -> None:
        self.set_focus(self.query_one("#grid", Input))  # now, not after the keys on their way

    def _error(self, message: str) -> None:
        self.query_one("#campaign-error", Static).update(Text(message))

    def _hint(self, text: str) -> None:
        self.query_one("#campaign-hint", Static).update(text)

    def _field(self, name: str) -> str:
        return self.query_one(f"#{name}", Input).value.strip()

    def _form(self) -> tuple[dict[str, list[FlagValue]], CampaignOptions]:
        """The grid and options as typed (FieldError naming the field and what is wrong)."""
        words = self._field("grid").split()
        try:
            if not words:
                raise ValueError("grid: give at least one NAME=V1,V2,… (e.g. budget=4,8,16)")
            grid = grids.parse_grid(self.profile, words)
        except (FlagError, ValueError) as exc:
            raise FieldError("grid", str(exc)) from None
        try:
            soak = seconds(self._field("soak"), "soak", allow_zero=True)
        except ValueError as exc:
            if self._field("soak"):
                raise FieldError("soak", str(exc)) from None
            soak = None  # empty: the profile's
        try:
            measure = seconds(self._field("measure"), "measure", allow_zero=False)
        except ValueError as exc:
            raise FieldError("measure", str(exc)) from None
        keep = "best" if self.query_one("#keep-best", Checkbox).value else "original"
        return grid, CampaignOptions(soak_s=soak, measure_s=measure, keep=keep)

    def _texts(self) -> list[str]:
        return [field.value for field in self.query(Input)]

    def submit(self) -> None:
        """Enter in a field: the form as it is now (keys after enter in the same burst are
        not in it), checked, then planned."""
        if self.has_class("-review"):
            return
        try:
            grid, options = self._form()
        except FieldError as exc:
            self._error(str(exc))
            self.set_focus(self.query_one(f"#{exc.field}", Input))  # where the mistake is
            return
        self._error("")
        self._hint("reading what the host runs now and its history …")
        self._make_plan(grid, options, self._texts())

    @work(exclusive=True, group="campaign-plan", exit_on_error=False, description="plan")
    async def _make_plan(
        self, grid: dict[str, list[FlagValue]], options: CampaignOptions, texts: list[str]
    ) -> None:
        try:
            prepared = await self._planner(grid, options)
        except (CampaignError, HistoryError, RemoteError) as exc:
            self._hint(HINT_FORM)
            self._error(str(exc))
            return
        if self._texts() != texts:  # edited again while the plan was being made
            self._hint(HINT_FORM)
            return
        self.prepared = prepared
        self.query_one("#campaign-plan-text", Static).update(plan_text(*prepared))
        for field in self.query(Input):
            field.disabled = True
        self.query_one(Checkbox).disabled = True
        self.add_class("-review")
        self._hint(HINT_REVIEW)
        self.set_focus(None)

    def _leave_review(self) -> None:
        self.prepared = None
        self.remove_class("-review")
        for field in self.query(Input):
            field.disabled = False
        self.query_one(Checkbox).disabled = False
        self._hint(HINT_FORM)
        self.query_one("#grid", Input).focus()

    def action_start(self) -> None:
        if self.prepared is not None and self.has_class("-review"):
            self.dismiss(self.prepared)

    def action_back(self) -> None:
        if self.has_class("-review"):
            self._leave_review()
        else:
            self.dismiss(None)
