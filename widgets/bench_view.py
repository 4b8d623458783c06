"""`b`: the bench results in the selected host's package, as `specops bench` shows them.

The files are the ones snapshots fetched (`bench/results_HOST/` of the host's package; `s`
fetches the host's newest first): a matrix per file with the speedup over the autoregressive
baseline, the bar chart, and what each file was measured with. `a` widens it to every host in
the package, `r` writes the findings report (REPORT.md) into the package. Reading and parsing
happen here, once per view (bench files are small); nothing touches a host.
"""

from __future__ import annotations

from pathlib import Path

from rich.console import RenderableType
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from console.evidence.bench import choose_baseline
from console.evidence.bench_files import load_bench
from console.evidence.bench_view import render


def bench_renderable(package: Path, host: str | None) -> tuple[str, RenderableType]:
    """(title, body) for the bench files of `host` (every host when None) in `package`."""
    root = package / "bench"
    where = root / f"results_{host}" if host is not None else root
    title = f"bench · {host or 'all hosts'} · {where}"
    if not where.is_dir():
        return title, Text(f"no bench files yet in {where}: `s` snapshots the host's", style="dim")
    try:
        files = load_bench([where])
    except OSError as exc:
        return title, Text(f"{where}: {exc}", style="red")
    if not files:
        return title, Text(f"no bench files (*.json, *.jsonl) in {where}", style="dim")
    return title, render(files, choose_baseline(files))


class BenchScreen(ModalScreen[None]):
    DEFAULT_CSS = """
    BenchScreen { align: center middle; }
    BenchScreen > Vertical {
        width: 95%; height: 90%; border: round $primary; background: $surface; padding: 0 1;
    }
    BenchScreen VerticalScroll { height: 1fr; }
    BenchScreen .hint { color: $text-muted; }
    """
    BINDINGS = [
        Binding("escape,b,q", "dismiss", "Close", id="bench-close"),
        Binding("a", "toggle_hosts", "All hosts", id="bench-all-hosts"),
        Binding("r", "app.write_report", "Report", id="bench-report"),
    ]

    def __init__(self, package: Path, host: str | None) -> None:
        super().__init__()
        self.package = package
        self.host = host
        self.selected = host
        """The host the screen was opened for; `a` toggles between it and every host."""

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(id="bench-title")
            with VerticalScroll():
                yield Static(id="bench-body")
            yield Static(
                "escape: close · a: this host / all hosts · r: write REPORT.md · "
                "`specops bench PATH --csv` for a spreadsheet",
                classes="hint",
            )

    def on_mount(self) -> None:
        self.refresh_view()

    def refresh_view(self) -> None:
        title, body = bench_renderable(self.package, self.host)
        self.query_one("#bench-title", Static).update(Text(title, style="bold"))
        self.query_one("#bench-body", Static).update(body)

    def action_toggle_hosts(self) -> None:
        self.host = None if self.host is not None else self.selected
        self.refresh_view()
