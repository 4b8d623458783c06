"""Acceptance length over time, one sparkline per host, so hosts compare at a glance.

Each row shows the host, its accept-length series over the last ten minutes (from the
engine's bounded series, never a copy of the journal), the newest value and the range the
sparkline spans (a sparkline scales to its data, so the range is what gives it meaning).
"""

from __future__ import annotations

from collections.abc import Sequence

from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Label, Sparkline

POINTS = 120
"""Samples drawn per host (the newest; about two minutes at SGLang's default cadence)."""


class _ChartRow(Horizontal):
    DEFAULT_CSS = """
    _ChartRow { height: 1; }
    _ChartRow > .name { width: 10; color: $text-muted; }
    _ChartRow.-selected > .name { color: $text; text-style: bold; }
    _ChartRow > Sparkline { width: 1fr; }
    _ChartRow > .value { width: 22; padding-left: 1; }
    """


class AcceptChart(Vertical):
    """One row per host: name, sparkline of accept len, last value and range."""

    DEFAULT_CSS = """
    AcceptChart { height: auto; border: round $primary-background; padding: 0 1; }
    """

    def __init__(self, hosts: Sequence[str], **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.hosts = list(hosts)
        self.values: dict[str, list[float]] = {host: [] for host in self.hosts}
        """What each sparkline currently draws (newest last)."""
        self.border_title = "accept len"
        self.selected: str | None = None

    def compose(self) -> ComposeResult:
        for i, host in enumerate(self.hosts):
            with _ChartRow(id=f"chart-{i}"):
                yield Label(host, classes="name")
                yield Sparkline([], id=f"spark-{i}")
                yield Label("-", classes="value", id=f"value-{i}")

    def update_host(self, host: str, values: Sequence[float]) -> None:
        """Draw a host's newest samples (oldest first)."""
        if host not in self.values:
            return
        shown = list(values[-POINTS:])
        self.values[host] = shown
        i = self.hosts.index(host)
        self.query_one(f"#spark-{i}", Sparkline).data = shown
        label = self.query_one(f"#value-{i}", Label)
        if shown:
            label.update(f"{shown[-1]:.2f}  ({min(shown):.2f}–{max(shown):.2f})", layout=False)
        else:
            label.update("-", layout=False)  # fixed width (CSS): no screen layout

    def select(self, host: str) -> None:
        # Only the rows that change: restyling all of them cost 2 ms of a host switch.
        if host == self.selected or host not in self.values:
            return
        for name, selected in ((self.selected, False), (host, True)):
            if name is not None:
                row = self.query_one(f"#chart-{self.hosts.index(name)}", _ChartRow)
                row.set_class(selected, "-selected")
        self.selected = host
