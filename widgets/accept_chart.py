"""Acceptance length over time, one sparkline per host, so hosts compare at a glance.

Each row shows the host, its accept-length series over the last ten minutes (from the
engine's bounded series, never a copy of the journal), the newest value and the range the
sparkline spans (a sparkline scales to its data, so the range is what gives it meaning).

The chart shows the hosts whose rows the fleet table shows, in the table's order: with 200
hosts a row per host filled the screen (the table and the journal were pushed off it) and
every layout arranged 200 row widgets (a filter applied took 90–270 ms). It is one widget
drawn with the line API, one line per shown host, and a changed series redraws its line
only: with every host streaming, the rows change four times a second, and Textual's
Sparkline blended a colour per bar on each draw (up to 30 ms a frame for 8 hosts).
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import groupby

from rich.segment import Segment
from rich.style import Style
from textual.geometry import Region, Size
from textual.strip import Strip
from textual.widget import Widget

POINTS = 120
"""Samples drawn per host (the newest; about two minutes at SGLang's default cadence)."""
BARS = "▁▂▃▄▅▆▇█"
NAME_WIDTH = 10
VALUE_WIDTH = 22
MAX_ROWS = 10
"""Hosts drawn at most on a roomy screen (the fleet table shows 9 there)."""


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


class AcceptChart(Widget):
    """One line per shown host: name, sparkline of accept len, last value and range."""

    COMPONENT_CLASSES = {
        "accept-chart--name",
        "accept-chart--selected",
        "accept-chart--min",
        "accept-chart--max",
    }
    DEFAULT_CSS = """
    AcceptChart { height: auto; border: round $primary-background; padding: 0 1; }
    AcceptChart > .accept-chart--name { color: $text-muted; }
    AcceptChart > .accept-chart--selected { color: $text; text-style: bold; }
    AcceptChart > .accept-chart--max { color: $primary; }
    AcceptChart > .accept-chart--min { color: $primary 30%; }
    """

    def __init__(self, hosts: Sequence[str], **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.hosts = list(hosts)
        self.values: dict[str, list[float]] = {host: [] for host in self.hosts}
        """What each sparkline draws (newest last), for every host, shown or not."""
        self.rows = MAX_ROWS
        """Hosts drawn at most (the app lowers it on a small terminal)."""
        self.shown: list[str] = self.hosts[:MAX_ROWS]
        """The hosts drawn, top to bottom (the fleet table's rows on screen)."""
        self._wanted: list[str] = list(self.hosts)
        self.border_title = "accept len"
        self.selected: str | None = None

    def set_rows(self, rows: int) -> None:
        """Draw at most `rows` hosts from now on."""
        self.rows = max(1, rows)
        self.show_hosts(self._wanted)

    def show_hosts(self, hosts: Sequence[str]) -> None:
        """Draw these hosts, in this order: those the chart knows, at most `rows` of them,
        the selected host among them when it is one of `hosts`."""
        self._wanted = wanted = [h for h in hosts if h in self.values]
        at = wanted.index(self.selected) if self.selected in wanted else 0
        start = max(0, at - self.rows + 1)
        shown = wanted[start : start + self.rows]
        if shown == self.shown:
            return
        # Only a change in the number of lines changes the screen's layout.
        resized = len(shown) != len(self.shown)
        self.shown = shown
        self.refresh(layout=resized)

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return len(self.shown)

    def update_host(self, host: str, values: Sequence[float]) -> None:
        """Keep a host's newest samples (oldest first); redraw its line if it is shown."""
        if host not in self.values:
            return
        self.values[host] = list(values[-POINTS:])
        self._refresh_host(host)

    def select(self, host: str) -> None:
        if host == self.selected or host not in self.values:
            return
        previous, self.selected = self.selected, host
        if host not in self.shown and host in self._wanted:
            self.show_hosts(self._wanted)  # scrolled to bring it in
        if previous is not None:
            self._refresh_host(previous)
        self._refresh_host(host)

    def _refresh_host(self, host: str) -> None:
        if host in self.shown:
            self.refresh(Region(0, self.shown.index(host), self.size.width, 1))

    def _bar_styles(self) -> list[Style]:
        _, base = self.background_colors
        low = base + self.get_component_styles("accept-chart--min").color
        high = base + self.get_component_styles("accept-chart--max").color
        last = len(BARS) - 1
        return [Style(color=low.blend(high, level / last).rich_color) for level in range(len(BARS))]

    def render_line(self, y: int) -> Strip:
        # Segments, not a Text with a span per bar: Rich's span splitting was most of it.
        base = self.rich_style
        width = self.size.width
        if y >= len(self.shown):
            return Strip.blank(width, base)
        host = self.shown[y]
        name_style = self.get_component_rich_style(
            "accept-chart--selected" if host == self.selected else "accept-chart--name"
        )
        segments = [Segment(f"{host[:NAME_WIDTH]:<{NAME_WIDTH}}", base + name_style)]
        bars = max(0, width - NAME_WIDTH - VALUE_WIDTH)
        values = self.values[host]
        levels = bar_levels(values, bars)
        if levels:
            styles = [base + style for style in self._bar_styles()]
            for level, run in groupby(levels):  # one segment per run of equal bars
                segments.append(Segment(BARS[level] * len(list(run)), styles[level]))
        else:
            segments.append(Segment(" " * bars, base))
        value = f"{values[-1]:.2f}  ({min(values):.2f}–{max(values):.2f})" if values else "-"
        segments.append(Segment(f" {value:<{VALUE_WIDTH - 1}}", base))
        return Strip(segments).crop_extend(0, width, base)
