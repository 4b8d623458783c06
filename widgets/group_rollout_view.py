"""One change to the marked hosts as it happens: a row per host (its wave, the step it is on,
how that step went) under the waves, each waiting, running, passed or stopped.

The screen only shows events: the App runs the rollout (console/tuning/group.py) on the
engine and hands over each host's rollout events and each wave's start and end. Escape
closes the screen, never the rollout: the summary also arrives as a notification.
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.message import Message
from textual.widgets import DataTable, Footer, Static

from console.hosts.events import (
    RolloutEvent,
    RolloutFinished,
    RolloutOutcome,
    RolloutProgress,
)
from console.tuning.group import GroupEvent, GroupOutcome, WaveEnded, WaveStarted
from console.tuning.group_plan import GroupPlan
from widgets.rollout_view import STATE_STYLE, ClosesWhenEnded

OUTCOME_STYLE = {
    RolloutOutcome.APPLIED: "green",
    RolloutOutcome.ROLLED_BACK: "yellow",
    RolloutOutcome.FAILED: "bold red",
}
OUTCOME_WORD = {
    RolloutOutcome.APPLIED: "applied",
    RolloutOutcome.ROLLED_BACK: "rolled back",
    RolloutOutcome.FAILED: "FAILED",
}


class GroupUpdated(Message):
    """A wave started or ended, or the whole rollout did (posted from the engine's thread)."""

    def __init__(self, rollout: str, event: GroupEvent | GroupOutcome) -> None:
        super().__init__()
        self.rollout = rollout
        self.event = event


def group_worker(rollout: str) -> str:
    """The app worker group of a group rollout (quitting asks twice while one runs)."""
    return f"rollout:group:{rollout}"


class GroupRolloutScreen(ClosesWhenEnded):
    DEFAULT_CSS = """
    GroupRolloutScreen #group-title { height: auto; padding: 0 1; }
    GroupRolloutScreen #group-waves { height: auto; padding: 0 1; }
    GroupRolloutScreen DataTable { height: 1fr; border: round $primary-background; }
    GroupRolloutScreen #group-outcome { height: auto; padding: 0 1; }
    GroupRolloutScreen.-ok #group-outcome { color: $success; }
    GroupRolloutScreen.-stopped #group-outcome { color: $warning; }
    """
    BINDINGS = [
        Binding("escape", "close", "Close (the rollout goes on)", id="group-close"),
        Binding("escape", "close_ended", "Close", id="group-close-ended"),
    ]

    def __init__(self, planned: GroupPlan, rollout: str, kind: str = "change") -> None:
        super().__init__()
        self.planned = planned
        self.rollout = rollout
        self.kind = kind
        self.wave_state = ["waiting"] * len(planned.waves)
        self.outcome: GroupOutcome | None = None
        self._wave_of = {p.host: n for n, w in enumerate(planned.waves, start=1) for p in w}
        self._early: list[RolloutEvent | GroupEvent | GroupOutcome] | None = []
        """Events that came before the screen was mounted; shown on mount. None after."""

    def compose(self) -> ComposeResult:
        title = Text.assemble((f"rollout {self.rollout}", "bold"), f" · {self.kind} · ")
        title.append(self.planned.summary())
        yield Static(title, id="group-title")
        yield Static(self._waves_text(), id="group-waves")
        yield DataTable(cursor_type="row", zebra_stripes=True, id="group-hosts")
        yield Static("waiting for the canary …", id="group-outcome")
        yield Footer()

    def on_mount(self) -> None:
        table: DataTable[Text | str] = self.query_one(DataTable)
        for column in ("host", "wave", "step", "state", "detail"):
            table.add_column(column, key=column)
        for plan in self.planned.plans:
            wave = self._wave_of.get(plan.host)
            if wave is None:
                row = (plan.host, "-", "-", Text("skipped", style="dim"), "already on it")
            else:
                row = (plan.host, self.planned.wave_label(wave), "-", Text("waiting"), "")
            table.add_row(*row, key=plan.host)
        self.query_one(DataTable).border_title = "hosts"
        early, self._early = self._early or [], None
        for event in early:
            if isinstance(event, WaveStarted | WaveEnded | GroupOutcome):
                self.show_group(event)
            else:
                self.show(event)

    def _waves_text(self) -> Text:
        text = Text()
        for n, (line, state) in enumerate(
            zip(self.planned.wave_lines(), self.wave_state, strict=True), start=1
        ):
            if n > 1:
                text.append(" · ")
            style = {"running": "yellow", "passed": "green", "stopped": "bold red"}.get(state)
            text.append(f"{line} ", style="bold" if state == "running" else "")
            text.append(state, style=style or "dim")
        return text

    def show(self, event: RolloutEvent) -> None:
        """One host's rollout event (its steps, and how it ended)."""
        if self._early is not None:
            self._early.append(event)
            return
        if event.host not in self._wave_of:
            return
        table: DataTable[Text | str] = self.query_one(DataTable)
        if isinstance(event, RolloutProgress):
            label = f"rollback: {event.step.value}" if event.rollback else event.step.value
            table.update_cell(event.host, "step", label, update_width=True)
            table.update_cell(
                event.host, "state", Text(event.state, style=STATE_STYLE.get(event.state, ""))
            )
            table.update_cell(event.host, "detail", event.detail, update_width=True)
        elif isinstance(event, RolloutFinished):
            word = Text(OUTCOME_WORD[event.outcome], style=OUTCOME_STYLE[event.outcome])
            table.update_cell(event.host, "state", word)
            why = ", ".join(x for x in (event.signature, event.stage) if x) or event.reason
            detail = why if event.outcome is not RolloutOutcome.APPLIED else "healthy"
            table.update_cell(event.host, "detail", detail, update_width=True)

    def show_group(self, event: GroupEvent | GroupOutcome) -> None:
        """A wave started or ended, or the rollout did."""
        if self._early is not None:
            self._early.append(event)
            return
        if isinstance(event, WaveStarted):
            self.wave_state[event.number - 1] = "running"
        elif isinstance(event, WaveEnded):
            passed = all(o.ok for o in event.outcomes)
            self.wave_state[event.number - 1] = "passed" if passed else "stopped"
        else:
            self.outcome = event
            self.refresh_bindings()
            self.wave_state = [s if s != "waiting" else "not started" for s in self.wave_state]
            table: DataTable[Text | str] = self.query_one(DataTable)
            for host in event.untouched:
                table.update_cell(host, "state", Text("never touched", style="dim"))
            self.set_class(event.ok, "-ok")
            self.set_class(not event.ok, "-stopped")
            lines = [line for line, _ in event.summary()]
            text = Text("\n".join(lines) + " · escape to close")
            self.query_one("#group-outcome", Static).update(text)
        self.query_one("#group-waves", Static).update(self._waves_text())

    @property
    def ended(self) -> bool:
        return self.outcome is not None
