"""`c`: the selected host's configurations side by side, from its experiment ledger.

The same tables as `specops compare HOST` (console/findings/compare_view.py): every
configuration a change left or tried, with its status and pooled numbers, and the newest
change's before and after with deltas judged against the run-to-run spread. A rolled-back
configuration is marked and never best. The ledger is read on the host (where every console's
changes land), on the engine's loop; when the host cannot answer, the console's cached copy,
and the view says which it shows.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from rich.console import RenderableType
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.widgets import Static

from console.findings.compare import configurations, default_pair
from console.findings.compare_view import render_compare
from console.ledger.ledger import Experiment
from widgets.dialog import Dialog

ReadLedger = Callable[[], Awaitable[tuple[Sequence[Experiment], str]]]
"""Reads the host's ledger: (experiments, where they were read)."""


def compare_renderable(host: str, experiments: Sequence[Experiment], where: str) -> RenderableType:
    if not experiments:
        return Text(
            f"no experiments for {host} yet in {where}: each flag change (f) adds one",
            style="dim",
        )
    found = list(experiments)
    configs = configurations(found)
    return render_compare(configs, default_pair(found, configs), f"read from {where}")


class CompareScreen(Dialog[None]):
    DEFAULT_CSS = """
    CompareScreen { align: center middle; }
    CompareScreen > Vertical {
        width: 95%; height: 90%; border: round $primary; background: $surface; padding: 0 1;
    }
    CompareScreen VerticalScroll { height: 1fr; }
    CompareScreen .hint { color: $text-muted; }
    """
    BINDINGS = [Binding("escape,c,q", "dismiss", "Close", id="compare-close")]

    def __init__(self, host: str, read: ReadLedger) -> None:
        super().__init__()
        self.host = host
        self._read = read
        self.loaded = False

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(Text(f"compare · {self.host} · the experiment ledger", style="bold"))
            with VerticalScroll():
                body = Text(f"reading {self.host}'s ledger…", style="dim")
                yield Static(body, id="compare-body")
            yield Static(
                f"escape: close · `specops compare {self.host} A B` for any two configurations",
                classes="hint",
            )

    def on_mount(self) -> None:
        self.run_worker(self._load(), exit_on_error=False, group="compare")

    async def _load(self) -> None:
        experiments, where = await self._read()
        self.query_one("#compare-body", Static).update(
            compare_renderable(self.host, experiments, where)
        )
        self.loaded = True
