"""Bench files as the operator reads them: a matrix per file, a bar chart, what each was run with.

One rendering for both front ends: `specops bench` prints these Rich renderables, the TUI's
bench screen (widgets/bench_view.py) shows the same ones, and the CSV / JSON records come from
here too. Speedups are against the baseline the caller chose (console/findings/bench.py:
`choose_baseline`), printed to two decimals of the exact ratio.

No I/O, no Textual (Rich only).
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from console.findings.bench import SERVING_ACCEPT_NOTE, BenchFile, Row, speedup_table
from console.findings.bench_matrix import ConfigValue

CRASHED_TEXT = "no results (crashed run)"
BAR_WIDTH = 40
CSV_FIELDS = (
    "file",
    "shape",
    "context",
    "concurrency",
    "output_throughput",
    "speedup",
    "baseline",
    "accept_length",
    "accept_note",
    "configuration",
)


def speedup_text(speedup: float | None) -> str:
    """`2.28×`: the exact ratio to two decimals; empty when there is none."""
    return f"{speedup:.2f}×" if speedup is not None else ""


def config_text(config: Mapping[str, ConfigValue]) -> str:
    """`budget=8 topk=4 cuda_graph=True`: a file's configuration on one line."""
    return " ".join(f"{k}={v}" for k, v in config.items())


def _axis(value: int | None, unit: str) -> str:
    return "–" if value is None else f"{unit}{value}"


def _number(value: float) -> str:
    return f"{value:.1f}" if value < 100 else f"{value:.0f}"


def matrix(bench: BenchFile, rows: Sequence[Row]) -> RenderableType:
    """Context length down, concurrency across: tok/s, speedup and accept length per cell."""
    if bench.crashed:
        return Text(f"{bench.label}: {CRASHED_TEXT} — {bench.detail}", style="bold red")
    title = f"{bench.label}  ·  {bench.shape.value}"
    mine = [r for r in rows if r.file is bench]
    contexts = sorted({r.point.context for r in mine}, key=lambda c: (c is not None, c or 0))
    concs = sorted({r.point.concurrency for r in mine}, key=lambda c: (c is not None, c or 0))
    table = Table(title=title, title_justify="left", show_lines=False, expand=False)
    table.add_column("context", justify="right")
    for conc in concs:
        table.add_column(_axis(conc, "C="), justify="right")
    cells = {(r.point.context, r.point.concurrency): r for r in mine}
    for context in contexts:
        values: list[str] = []
        for conc in concs:
            row = cells.get((context, conc))
            if row is None or row.point.throughput is None:
                values.append("")
                continue
            parts = [f"{_number(row.point.throughput)} tok/s"]
            if row.speedup is not None:
                parts.append(speedup_text(row.speedup))
            if row.point.accept_length is not None:
                mark = "*" if row.point.accept_note else ""
                parts.append(f"acc{mark} {row.point.accept_length:.2f}")
            values.append("  ".join(parts))
        table.add_row(_axis(context, ""), *values)
    return table


def bar_chart(rows: Sequence[Row], width: int = BAR_WIDTH) -> RenderableType:
    """One bar per measurement, scaled to the largest throughput, with its speedup."""
    measured = [r for r in rows if r.point.throughput is not None]
    if not measured:
        return Text("no measurements to chart")
    top = max(r.point.throughput or 0.0 for r in measured) or 1.0
    table = Table.grid(padding=(0, 1))
    table.add_column()
    table.add_column(justify="right")
    table.add_column()
    table.add_column(justify="right")
    for row in measured:
        value = row.point.throughput or 0.0
        cells = round(width * value / top)
        label = (
            f"{row.file.label} {_axis(row.point.context, 'ctx ')} "
            f"{_axis(row.point.concurrency, 'C=')}"
        )
        table.add_row(
            label,
            _number(value),
            Text("█" * max(cells, 1), style="green" if not row.file.autoregressive else "blue"),
            speedup_text(row.speedup),
        )
    return table


def configurations(files: Iterable[BenchFile]) -> RenderableType:
    """What each file was measured with, and where that came from."""
    table = Table(title="configurations", title_justify="left")
    table.add_column("file")
    table.add_column("configuration")
    table.add_column("from")
    for bench in files:
        text = config_text(bench.config) or "unknown"
        table.add_row(bench.label, text, bench.config_source or "—")
    return table


def render(files: Sequence[BenchFile], baseline: BenchFile | None) -> RenderableType:
    """Everything `specops bench` prints, as one renderable."""
    rows = speedup_table(files, baseline)
    parts: list[RenderableType] = []
    if baseline is not None:
        parts.append(Text(f"speedup against {baseline.label} ({baseline.path})"))
    else:
        parts.append(Text("no baseline: no autoregressive file found (--baseline NAME)"))
    parts.extend(matrix(b, rows) for b in files)
    parts.append(bar_chart(rows))
    parts.append(configurations(files))
    if any(r.point.accept_note == SERVING_ACCEPT_NOTE for r in rows):
        parts.append(
            Text(f"acc* bench_serving's accept length: {SERVING_ACCEPT_NOTE}", style="dim")
        )
    return Group(*parts)


def records(files: Sequence[BenchFile], baseline: BenchFile | None) -> list[dict[str, Any]]:
    """One JSON object per file: its points with their speedups."""
    rows = speedup_table(files, baseline)
    found: list[dict[str, Any]] = []
    for bench in files:
        found.append(
            {
                "file": bench.path,
                "label": bench.label,
                "shape": bench.shape.value,
                "crashed": bench.crashed,
                "detail": CRASHED_TEXT + ": " + bench.detail if bench.crashed else bench.detail,
                "bytes": bench.size,
                "autoregressive": bench.autoregressive,
                "configuration": dict(bench.config),
                "configuration_from": bench.config_source,
                "baseline": baseline.path if baseline is not None else None,
                "points": [
                    {
                        "context": r.point.context,
                        "concurrency": r.point.concurrency,
                        "output_throughput": r.point.throughput,
                        "speedup": r.speedup,
                        "accept_length": r.point.accept_length,
                        "accept_note": r.point.accept_note,
                        "metrics": dict(r.point.metrics),
                    }
                    for r in rows
                    if r.file is bench
                ],
            }
        )
    return found


def json_lines(files: Sequence[BenchFile], baseline: BenchFile | None) -> str:
    return "".join(json.dumps(r) + "\n" for r in records(files, baseline))


def csv_text(files: Sequence[BenchFile], baseline: BenchFile | None) -> str:
    """One CSV row per measurement, and one per crashed file (empty numbers, its reason)."""
    rows = speedup_table(files, baseline)
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(CSV_FIELDS)
    base = baseline.label if baseline is not None else ""
    for bench in files:
        config = config_text(bench.config)
        if bench.crashed:
            writer.writerow(
                [bench.label, "crashed", "", "", "", "", base, "", CRASHED_TEXT, config]
            )
            continue
        for r in (r for r in rows if r.file is bench):
            writer.writerow(
                [
                    bench.label,
                    bench.shape.value,
                    "" if r.point.context is None else r.point.context,
                    "" if r.point.concurrency is None else r.point.concurrency,
                    r.point.throughput,
                    "" if r.speedup is None else f"{r.speedup:.4f}",
                    base,
                    "" if r.point.accept_length is None else r.point.accept_length,
                    r.point.accept_note,
                    config,
                ]
            )
    return buffer.getvalue()
