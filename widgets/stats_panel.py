"""The selected host's numbers: last / mean / p50 / min / max over 1 min and 10 min of this
run, all of this run, the previous run, and every run with the current flag values.

"This run" is the current service invocation: every window starts afresh when the service
restarts, and the run before it is its own row, so a comparison is always between
configurations, never a blend of them.
"""

from __future__ import annotations

from collections.abc import Mapping

from rich.text import Text
from textual.widgets import Static

from console.watch.metrics import SeriesSummary, Stats

SHOWN = (("accept_len", "accept len", "{:.2f}"), ("gen_throughput", "tok/s", "{:.0f}"))
"""(series, label, number format) in display order."""
LEFT_COLUMNS = 2
"""Series and window names are left-aligned; the numbers right-aligned."""


class StatsPanel(Static):
    DEFAULT_CSS = """
    StatsPanel { height: auto; width: 64; border: round $primary-background; }
    """

    def __init__(self, **kwargs: object) -> None:
        super().__init__("", **kwargs)  # type: ignore[arg-type]
        self.host: str | None = None
        self._first_draw = True
        self.summaries: dict[str, SeriesSummary] = {}
        """What the panel shows now, by series name."""
        self.border_title = "stats"

    def show(
        self, host: str, summaries: Mapping[str, SeriesSummary], kv_share: float | None = None
    ) -> None:
        """`kv_share`: the KV cache's share in use (the newest decode line's, or /metrics'),
        said in the title: what a budget change moves and what runs a card out of memory."""
        self.host = host
        self.summaries = dict(summaries)
        self.title_for(host, kv_share)
        header = ("", "window", "n", "last", "mean", "p50", "min", "max")
        rows: list[tuple[str, ...]] = []
        for name, label, fmt in SHOWN:
            summary = self.summaries.get(name)
            windows = (
                ("1 min", summary.minute if summary else None),
                ("10 min", summary.ten_minutes if summary else None),
                ("this run", summary.invocation if summary else None),
                ("previous run", summary.previous if summary else None),
                (_config_label(summary), summary.configuration if summary else None),
            )
            for i, (window, stats) in enumerate(windows):
                rows.append((label if i == 0 else "", window, *_cells(stats, fmt)))
        table = _text_table(header, rows)
        # Same rows every time: only the first draw can change the panel's size, and a
        # layout of the whole screen every second is what made the UI stutter.
        self.update(table, layout=self._first_draw)
        self._first_draw = False

    def title_for(self, host: str, kv_share: float | None) -> None:
        """The title: the host, and its KV cache in use (set as soon as a number comes, not
        on the panel's next second)."""
        self.border_title = f"stats · {host}{_kv_text(kv_share)}"


def _kv_text(kv_share: float | None) -> str:
    return "" if kv_share is None else f" · KV cache {kv_share:.0%} used"


def _config_label(summary: SeriesSummary | None) -> str:
    runs = summary.configuration_runs if summary else 0
    return f"same flags ×{runs}"


def _text_table(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> Text:
    """Columns padded by hand: a Rich `Table` took 4 ms to render for these 7 rows, and the
    panel is redrawn on every host switch (a key press waiting for its repaint)."""
    widths = [max(len(r[c]) for r in (header, *rows)) for c in range(len(header))]

    def line(cells: tuple[str, ...]) -> str:
        padded = (
            cell.ljust(width) if c < LEFT_COLUMNS else cell.rjust(width)
            for c, (cell, width) in enumerate(zip(cells, widths, strict=True))
        )
        return " " + "  ".join(padded) + " "  # the look of a Rich table with padding (0, 1)

    text = Text(no_wrap=True, overflow="ellipsis")
    text.append(line(header), style="bold")
    for row in rows:
        text.append("\n" + line(row))
    return text


def _cells(stats: Stats | None, fmt: str) -> list[str]:
    if stats is None:
        return ["0", "-", "-", "-", "-", "-"]
    numbers = (stats.last, stats.mean, stats.p50, stats.min, stats.max)
    return [str(stats.count), *(fmt.format(n) for n in numbers)]
