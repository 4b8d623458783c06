"""`c`: the selected host's configurations side by side, from the experiment ledger.

The same tables as `specops compare HOST --offline` (console/evidence/compare_view.py): every
configuration a change left or tried, with its status and pooled numbers, and the newest
change's before and after with deltas judged against the run-to-run spread. A rolled-back
configuration is marked and never best. Reads the console's ledger files only.
"""

from __future__ import annotations

from rich.console import RenderableType
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from console.evidence.compare import configurations, default_pair
from console.evidence.compare_view import render_compare
from console.evidence.ledger import ledger_dir, load


def compare_renderable(host: str) -> RenderableType:
    experiments = [e for _, e in load(host)]
    if not experiments:
        return Text(
            f"no experiments for {host} yet in {ledger_dir(host)}: each flag change (f) adds one",
            style="dim",
        )
    configs = configurations(experiments)
    return render_compare(configs, default_pair(experiments, configs))


class CompareScreen(ModalScreen[None]):
    DEFAULT_CSS = """
    CompareScreen { align: center middle; }
    CompareScreen > Vertical {
        width: 95%; height: 90%; border: round $primary; background: $surface; padding: 0 1;
    }
    CompareScreen VerticalScroll { height: 1fr; }
    CompareScreen .hint { color: $text-muted; }
    """
    BINDINGS = [Binding("escape,c,q", "dismiss", "Close", id="compare-close")]

    def __init__(self, host: str) -> None:
        super().__init__()
        self.host = host

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(Text(f"compare · {self.host} · the experiment ledger", style="bold"))
            with VerticalScroll():
                yield Static(compare_renderable(self.host), id="compare-body")
            yield Static(
                f"escape: close · `specops compare {self.host} A B` for any two configurations",
                classes="hint",
            )
