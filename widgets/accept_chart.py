"""Acceptance length over time, one sparkline per host, so hosts compare at a glance.

Each row shows the host, its accept-length series over the last ten minutes (from the
engine's bounded series, never a copy of the journal), the newest value and the range the
sparkline spans (a sparkline scales to its data, so the range is what gives it meaning).

A row is one widget drawing one line of text: with every host streaming, all rows change
four times a second, and Textual's Sparkline blended a colour per bar on each draw (up to
30 ms a frame for 8 hosts).
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import groupby

from rich.segment import Segment
from rich.style import Style
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.strip import Strip
from textual.widget import Widget

POINTS = 120
"""Samples drawn per host (the newest; about two minutes at SGLang's default cadence)."""
BARS = "▁▂▃▄▅▆▇█"
NAME_WIDTH = 10
VALUE_WIDTH = 22


def bar_levels(values: Sequence[float], width: int) -> list[int]:
    """`values` across `width` columns, as levels 0–7.

    More values than columns: each column draws the largest of its share; fewer: each value
    spans several columns (as Textual's Sparkline does). Equal values draw full bars: a flat
    series is a level, not an absence.
    """
    count = len(values)
    if not count or width <= 0:
        return []
    buckets = []
    for column in range(width):
        start = column * count // width
        end = max(start + 1, (column + 1) * count // width)
        buckets.append(max(values[start:end]))
    low, high = min(buckets), max(buckets)
    if high == low:
        return [len(BARS) - 1] * width
    scale = (len(BARS) - 1) / (high - low)
    return [round((value - low) * scale) for value in buckets]


class ChartRow(Widget):
    """One host: name, bars, newest value and range."""

    COMPONENT_CLASSES = {
        "chart-row--name",
        "chart-row--selected",
        "chart-row--min",
        "chart-row--max",
    }
    DEFAULT_CSS = """
    ChartRow { height: 1; }
    ChartRow > .chart-row--name { color: $text-muted; }
    ChartRow > .chart-row--selected { color: $text; text-style: bold; }
    ChartRow > .chart-row--max { color: $primary; }
    ChartRow > .chart-row--min { color: $primary 30%; }
    """

    def __init__(self, host: str, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.host = host
        self.values: list[float] = []
        self.selected = False

    def show(self, values: list[float]) -> None:
        self.values = values
        self.refresh()

    def select(self, selected: bool) -> None:
        if selected != self.selected:
            self.selected = selected
            self.refresh()

    def _bar_styles(self) -> list[Style]:
        _, base = self.background_colors
        low = base + self.get_component_styles("chart-row--min").color
        high = base + self.get_component_styles("chart-row--max").color
        last = len(BARS) - 1
        return [Style(color=low.blend(high, level / last).rich_color) for level in range(len(BARS))]

    def render_line(self, y: int) -> Strip:
        # Segments, not a Text with a span per bar: Rich's span splitting was most of it.
        base = self.rich_style
        name_style = self.get_component_rich_style(
            "chart-row--selected" if self.selected else "chart-row--name"
        )
        segments = [Segment(f"{self.host[:NAME_WIDTH]:<{NAME_WIDTH}}", base + name_style)]
        bars = max(0, self.size.width - NAME_WIDTH - VALUE_WIDTH)
        levels = bar_levels(self.values, bars)
        if levels:
            styles = [base + style for style in self._bar_styles()]
            for level, run in groupby(levels):  # one segment per run of equal bars
                segments.append(Segment(BARS[level] * len(list(run)), styles[level]))
        else:
            segments.append(Segment(" " * bars, base))
        values = self.values
        value = f"{values[-1]:.2f}  ({min(values):.2f}–{max(values):.2f})" if values else "-"
        segments.append(Segment(f" {value:<{VALUE_WIDTH - 1}}", base))
        return Strip(segments).crop_extend(0, self.size.width, base)


class AcceptChart(Vertical):
    """One row per host: name, sparkline of accept len, last value and range."""

    DEFAULT_CSS = """
    AcceptChart {
        height: auto; max-height: 12; overflow-y: auto; scrollbar-size-vertical: 1;
        border: round $primary-background; padding: 0 1;
    }
    """
    # Capped like the fleet table: with 60 hosts an uncapped chart was 62 lines tall and
    # pushed the table off a 48-line screen; it scrolls to the selected host instead.

    def __init__(self, hosts: Sequence[str], **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.hosts = list(hosts)
        self.values: dict[str, list[float]] = {host: [] for host in self.hosts}
        """What each sparkline currently draws (newest last)."""
        self.border_title = "accept len"
        self.selected: str | None = None
        self._rows: dict[str, ChartRow] = {}

    def compose(self) -> ComposeResult:
        for i, host in enumerate(self.hosts):
            row = ChartRow(host, id=f"chart-{i}")
            self._rows[host] = row
            yield row

    def update_host(self, host: str, values: Sequence[float]) -> None:
        """Draw a host's newest samples (oldest first)."""
        row = self._rows.get(host)
        if row is None:
            return
        shown = list(values[-POINTS:])
        self.values[host] = shown
        row.show(shown)

    def select(self, host: str) -> None:
        if host == self.selected or host not in self._rows:
            return
        if self.selected is not None:
            self._rows[self.selected].select(False)
        self._rows[host].select(True)
        self.selected = host
        self._rows[host].scroll_visible(animate=False, immediate=True)
