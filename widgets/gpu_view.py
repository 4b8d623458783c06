"""`u`: the selected host's GPUs (their model in the title), one line each: memory and
utilization with their history over the last readings, temperature, power against its limit,
SM clock, what holds the clocks down, uncorrected ECC errors. Updated while open, as readings
come.

The history bars are absolute (an empty bar is 0 %, a full one 100 %), unlike the accept
chart's, which scale to their range: a card at 97 % memory must look full, not flat.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.widgets import Static

from console.service.gpu_model import model_of
from console.watch.gpu_reader import GpuReading
from console.watch.gpus import GpuState, summary
from widgets.accept_chart import BARS
from widgets.dialog import Dialog

HISTORY = 30
"""Readings drawn in each bar (five minutes at the default 10 s)."""


def bars(shares: Sequence[float | None]) -> str:
    """0–1 shares as bars, oldest first; an unknown share is a space."""
    top = len(BARS) - 1
    return "".join(" " if s is None else BARS[max(0, min(top, round(s * top)))] for s in shares)


def _share(used: float | None, total: float | None) -> float | None:
    return None if used is None or not total else used / total


def _number(value: float | None, fmt: str) -> str:
    return "-" if value is None else fmt.format(value)


def _gib(mib: float | None, fmt: str) -> str:
    return _number(None if mib is None else mib / 1024, fmt)


HELD, ECC = 8, 9
"""The columns drawn in colour: what holds the clocks down (yellow), ECC errors (red)."""


def gpu_lines(readings: Sequence[GpuReading]) -> Text:
    """The newest reading's GPUs, with each one's history from the readings before it; a GPU
    the recent readings had and the newest has not (off the bus, or the driver lost it) stays
    listed, `not in the last read`, in red."""
    newest = readings[-1]
    recent = readings[-HISTORY:]
    indexes = sorted({g.index for r in recent for g in r.gpus})
    if not indexes:
        return Text(newest.problem or "no GPUs", style="yellow")
    header = ("gpu", "memory", "", "util", "", "temp", "power", "SM", "held by", "ECC")
    rows: list[tuple[str, ...]] = []
    for index in indexes:
        past = [_of(r.gpus, index) for r in recent]
        memory = [
            None if g is None else _share(g.memory_used_mib, g.memory_total_mib) for g in past
        ]
        util = [None if g is None or g.util_pct is None else g.util_pct / 100 for g in past]
        gpu = past[-1]
        if gpu is None:
            rows.append((str(index), "not in the last read", bars(memory), "", bars(util)))
            continue
        used, total = gpu.memory_used_mib, gpu.memory_total_mib
        rows.append(
            (
                str(index),
                f"{_gib(used, '{:.1f}')}/{_gib(total, '{:.0f}')} GiB",
                bars(memory),
                _number(gpu.util_pct, "{:.0f}%"),
                bars(util),
                _number(gpu.temp_c, "{:.0f}°C"),
                f"{_number(gpu.power_w, '{:.0f}')}/{_number(gpu.power_limit_w, '{:.0f}')} W",
                _number(gpu.sm_clock_mhz, "{:.0f} MHz"),
                ", ".join(gpu.slowed) or "-",
                _number(gpu.ecc_uncorrected, "{:d}"),
            )
        )
    widths = [max(len(r[c]) for r in (header, *rows) if c < len(r)) for c in range(len(header))]
    text = Text(no_wrap=True, overflow="ellipsis")
    text.append("  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)), "bold")
    for row in rows:
        text.append("\n")
        missing = len(row) < len(header)
        for c, cell in enumerate(row):
            style = "bold red" if missing and c == 1 else ""
            if c == HELD and cell != "-":
                style = "yellow"  # the clocks are held down: tok/s falls with no log line
            elif c == ECC and cell not in ("-", "0"):
                style = "bold red"
            text.append(cell, style)
            if c < len(row) - 1:
                text.append(" " * (widths[c] - len(cell) + 2))
    return text


def _of(gpus: Sequence[GpuState], index: int) -> GpuState | None:
    return next((g for g in gpus if g.index == index), None)


class GpuScreen(Dialog[None]):
    DEFAULT_CSS = """
    GpuScreen { align: center middle; }
    GpuScreen > Vertical {
        width: auto; max-width: 100%; height: auto; max-height: 90%;
        border: round $primary; background: $surface; padding: 0 1;
    }
    GpuScreen #gpu-lines { width: auto; height: auto; }
    GpuScreen .hint { color: $text-muted; }
    """
    BINDINGS = [Binding("escape,u,q", "dismiss", "Close", id="gpus-close")]

    def __init__(self, host: str, readings: Sequence[GpuReading]) -> None:
        super().__init__()
        self.host = host
        self.readings = list(readings)

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static("", id="gpu-title")
            yield Static("", id="gpu-lines")
            yield Static("escape: close", classes="hint")

    def on_mount(self) -> None:
        self._draw()

    def update_readings(self, readings: Sequence[GpuReading]) -> None:
        self.readings = list(readings)
        self._draw()

    def _draw(self) -> None:
        title = self.query_one("#gpu-title", Static)
        lines = self.query_one("#gpu-lines", Static)
        if not self.readings:
            title.update(Text.assemble(("GPUs · ", "bold"), (self.host, "bold")))
            lines.update(
                Text("not read yet (the host is not connected, or its first read is on its way)")
            )
            return
        newest = self.readings[-1]
        when = datetime.fromtimestamp(newest.time).strftime("%H:%M:%S")
        said = "no numbers"
        if newest.gpus:
            model = model_of([g.name for g in newest.gpus])
            said = f"{model}: {summary(newest.gpus, count=False)}"
        title.update(
            Text.assemble(("GPUs · ", "bold"), (self.host, "bold"), f"  {said}  (read {when})")
        )
        text = gpu_lines(self.readings)
        for xid in [x for r in self.readings for x in r.xids][-5:]:  # the newest, below
            text.append(f"\n{xid.text()}", style="bold red")
        lines.update(text)
