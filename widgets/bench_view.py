"""`b`: the bench results in the selected host's package, as `specops bench` shows them.

The files are the ones snapshots fetched (`bench/results_HOST/` of the host's package; `s`
fetches the host's newest first): a matrix per file with the speedup over the autoregressive
baseline, the bar chart, and what each file was measured with. `a` widens it to every host in
the package, `h` shows the selected host's bench files as they are on the host now (read over
SFTP on the engine's loop, nothing kept: console/findings/host_bench.py), `r` writes the
findings report (REPORT.md) into the package. Reading and parsing
happen here, once per view (bench files are small); only `h` touches the host.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

from rich.console import Group, RenderableType
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.widgets import Static

from console.findings.bench import choose_baseline
from console.findings.bench_files import load_bench
from console.findings.bench_view import render
from console.findings.host_bench import HostBench
from console.transport.ssh import RemoteError
from widgets.dialog import Dialog


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


ReadHostBench = Callable[[], Awaitable[HostBench]]
"""Reads the selected host's bench files over its connection (on the engine's loop)."""


def host_renderable(host: str, found: HostBench) -> tuple[str, RenderableType]:
    """(title, body) for the bench files read on the host now."""
    title = f"bench · {host} · on the host now (not kept: `s` snapshots them)"
    notes = [Text(n, style="dim") for n in found.notes] + [
        Text(e, style="red") for e in found.errors
    ]
    if not found.files:
        return title, Group(Text("no bench files match the profile's globs", style="dim"), *notes)
    return title, Group(render(found.files, choose_baseline(found.files)), *notes)


class BenchScreen(Dialog[None]):
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
        Binding("h", "from_host", "On the host now", id="bench-from-host"),
        Binding("r", "app.write_report", "Report", id="bench-report"),
    ]

    def __init__(
        self, package: Path, host: str | None, read_host: ReadHostBench | None = None
    ) -> None:
        super().__init__()
        self.package = package
        self.host = host
        self._read_host = read_host
        self.from_host = False
        """Whether the view shows the host's files (`h`) rather than the package's."""
        self.selected = host
        """The host the screen was opened for; `a` toggles between it and every host."""

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(id="bench-title")
            with VerticalScroll():
                yield Static(id="bench-body")
            yield Static(
                "escape: close · a: this host / all hosts · h: on the host now · "
                "r: write REPORT.md · "
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
        self.from_host = False
        self.refresh_view()

    def action_from_host(self) -> None:
        if self._read_host is None or self.selected is None:
            return
        self.from_host = True
        self.query_one("#bench-title", Static).update(
            Text(f"bench · {self.selected} · reading the host's files…", style="bold")
        )
        self.run_worker(self._show_host(self._read_host), exit_on_error=False, group="bench")

    async def _show_host(self, read: ReadHostBench) -> None:
        body: RenderableType
        try:
            found = await read()
        except RemoteError as exc:
            title, body = f"bench · {self.selected} · on the host", Text(str(exc), style="red")
        else:
            title, body = host_renderable(self.selected or "", found)
        if self.from_host:  # `a` meanwhile went back to the package
            self.query_one("#bench-title", Static).update(Text(title, style="bold"))
            self.query_one("#bench-body", Static).update(body)
