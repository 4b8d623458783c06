"""A tuning campaign as it runs: the grid filling in, cells done of all and the time left,
the current cell's phase and step, the host's live accept length, and `x` to stop after the
current cell (the host then goes back to where it started).

The screen only draws: the app runs the campaign on the engine (console/tuning/sweep.py) and
hands each event to `show`. It reads the campaign's record, which the sweep updates as cells
end, so a screen closed (escape: the campaign goes on) and opened again with `C` shows all of
it.
"""

from __future__ import annotations

from collections.abc import Callable

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.message import Message
from textual.screen import Screen
from textual.widgets import DataTable, Footer, ProgressBar, Static

from console.hosts.events import RolloutEvent, RolloutProgress
from console.ledger import campaigns
from console.ledger.campaigns import Campaign, Cell, cell_text
from console.tuning.campaign_start import remaining_s
from console.tuning.sweep import SweepEvent, SweepFinished, SweepProgress

OUTCOME_STYLE = {
    "pending": "dim",
    "measured": "green",
    "baseline": "cyan",
    "crashed": "red",
    "failed": "bold red",
    "skipped": "dim",
}
PHASE_STYLE = {"changing": "yellow", "measuring": "cyan", "benchmarking": "cyan"}
LIVE_INTERVAL_S = 1.0
COLUMNS = ("cell", "flags", "outcome", "accept len", "tok/s", "speedup", "why")


class CampaignUpdated(Message):
    """A campaign's event (a cell's phase, a step of its change, its end), posted to the App
    from the engine's thread."""

    def __init__(self, host: str, event: SweepEvent | RolloutEvent) -> None:
        super().__init__()
        self.host = host
        self.event = event


def campaign_group(host: str) -> str:
    """The worker group of a campaign on `host` (a campaign counts as a change running)."""
    return f"rollout:campaign:{host}"


def end_text(campaign: Campaign) -> Text:
    """How the campaign ended: its state, where the host is, the best cell."""
    style = {"finished": "green", "stopped": "yellow"}.get(campaign.state, "bold red")
    text = Text.assemble((campaign.state, f"bold {style}"), f": {campaign.end}")
    best = campaign.best()
    if best is not None and best.tok_s is not None:
        text.append(f" · best stable {cell_text(best.values)} ({best.tok_s:.0f} tok/s)")
    return text


class CampaignScreen(Screen[None]):
    DEFAULT_CSS = """
    CampaignScreen #campaign-title { height: auto; padding: 0 1; }
    CampaignScreen #campaign-progress { height: auto; padding: 0 1; }
    CampaignScreen #campaign-progress ProgressBar { width: auto; }
    CampaignScreen #campaign-now { height: auto; padding: 0 1; }
    CampaignScreen DataTable { height: 1fr; border: round $primary-background; }
    CampaignScreen #campaign-end { height: auto; padding: 0 1; }
    """
    BINDINGS = [
        Binding("escape", "close", "Close (the campaign goes on)", id="campaign-close"),
        Binding("x", "stop_after_cell", "Stop after this cell", id="campaign-stop"),
    ]

    def __init__(
        self,
        campaign: Campaign,
        per_cell: float,
        *,
        live_accept: Callable[[], float | None],
        stop: Callable[[], None],
    ) -> None:
        """`live_accept`: the host's newest accept length; `stop`: ask the running sweep to
        stop after its current cell."""
        super().__init__()
        self.campaign = campaign
        self.per_cell = per_cell
        self._live_accept = live_accept
        self._stop = stop
        self.phase = "starting"
        self.step = ""
        self.stopping = False
        self.finished = campaign.state in ("finished", "stopped", "failed")

    def compose(self) -> ComposeResult:
        c = self.campaign
        axes = "  ".join(f"{k}={','.join(str(x) for x in v)}" for k, v in c.grid.items())
        yield Static(
            Text.assemble((c.host, "bold"), f" · campaign {c.id} · {axes}"), id="campaign-title"
        )
        yield ProgressBar(total=len(c.cells), show_eta=False, id="campaign-bar")
        yield Static("", id="campaign-progress")
        yield Static("", id="campaign-now")
        yield DataTable(cursor_type="row", zebra_stripes=True, id="campaign-cells")
        yield Static("", id="campaign-end")
        yield Footer()

    def on_mount(self) -> None:
        table: DataTable[Text | str] = self.query_one(DataTable)
        for column in COLUMNS:
            table.add_column(column, key=column)
        self._draw()
        self.set_interval(LIVE_INTERVAL_S, self._draw_now)

    # --- events ----------------------------------------------------------------------

    def show(self, event: SweepEvent | RolloutEvent) -> None:
        """One event of this screen's campaign (the App hands it over, on the UI thread)."""
        if isinstance(event, SweepProgress):
            where = "baseline" if event.index is None else f"cell {event.index + 1}/{event.total}"
            self.phase = f"{where} {cell_text(event.cell.values)}: {event.phase}"
            self.step = ""
        elif isinstance(event, RolloutProgress) and event.state in ("running", "waiting"):
            back = "rollback: " if event.rollback else ""
            self.step = f"{back}{event.step.value} {event.detail}".strip()
        elif isinstance(event, SweepFinished):
            self.campaign = event.campaign
            self.finished = True
        if self.is_attached:
            self._draw()

    def failed(self, message: str) -> None:
        """The campaign stopped on an error (a lost link, an unreadable record)."""
        self.finished = True
        self.phase = ""
        if self.is_attached:
            self._draw()
            self.query_one("#campaign-end", Static).update(Text(message, style="bold red"))

    # --- drawing ---------------------------------------------------------------------

    def _draw(self) -> None:
        c = self.campaign
        self.query_one(ProgressBar).update(total=len(c.cells), progress=c.done)
        left = remaining_s(c, self.per_cell)
        eta = "" if self.finished else f" · about {max(1, round(left / 60))} min left"
        stopping = " · stopping after this cell" if self.stopping and not self.finished else ""
        self.query_one("#campaign-progress", Static).update(
            Text(f"{c.done}/{len(c.cells)} cells{eta}{stopping}")
        )
        table: DataTable[Text | str] = self.query_one(DataTable)
        rows = campaigns.table_rows(c)
        if c.baseline is None:  # measured first: its row leads from the start
            rows.insert(0, ("base", Cell(values=dict(c.start))))
        for label, cell in rows:
            figures = campaigns.cell_figures(c, cell)
            outcome = cell.outcome
            current = "base" if c.baseline is None else str((c.current or 0) + 1)
            running = c.baseline is None or c.current is not None
            if running and label == current and not self.finished:
                outcome = "running"
            row: list[Text | str] = [
                label,
                figures["flags"],
                Text(outcome, style=OUTCOME_STYLE.get(outcome, "yellow")),
                figures["accept len"],
                figures["tok/s"],
                figures["speedup"],
                figures["why"],
            ]
            if label in table.rows:
                for column, value in zip(COLUMNS, row, strict=True):
                    table.update_cell(label, column, value, update_width=True)
            else:
                table.add_row(*row, key=label)
        self._draw_now()
        if self.finished:
            self.query_one("#campaign-end", Static).update(
                Text.assemble(end_text(c), " · escape to close")
            )

    def _draw_now(self) -> None:
        now = self.query_one("#campaign-now", Static)
        if self.finished:
            now.update("")
            return
        accept = self._live_accept()
        live = f" · accept len now {accept:.2f}" if accept is not None else ""
        step = f" · {self.step}" if self.step else ""
        now.update(Text(f"{self.phase}{step}{live}", style=self._phase_style()))

    def _phase_style(self) -> str:
        return next((s for p, s in PHASE_STYLE.items() if self.phase.endswith(p)), "")

    # --- keys ------------------------------------------------------------------------

    def action_stop_after_cell(self) -> None:
        if self.finished or self.stopping:
            return
        self.stopping = True
        self._stop()
        self.notify(
            f"{self.campaign.host}: the campaign stops after this cell, then the host goes "
            "back to the configuration it started on",
            title="campaign",
            markup=False,
        )
        self._draw()

    def action_close(self) -> None:
        self.dismiss(None)
