"""Configurations side by side as the operator reads them: one rendering for the CLI and TUI.

`specops compare` prints these Rich renderables and its `--json` record comes from here; the
TUI's compare screen (widgets/compare_view.py) shows the same tables.

No I/O, no Textual (Rich only).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from rich.console import Group, RenderableType
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from console.findings.compare import (
    Configuration,
    Delta,
    best,
    compare,
    config_key,
    value_text,
)
from console.ledger.ledger import SERIES, WindowStats

LABELS = {
    "accept_len": "accept len",
    "accept_rate": "accept rate",
    "gen_throughput": "tok/s",
    "running_req": "running",
    "queue_req": "queued",
    "token_usage": "KV cache used",
}

Pair = tuple[Configuration, Configuration] | None


def _stats(w: WindowStats | None, fmt: str = "{:.2f}") -> str:
    if w is None:
        return "-"
    return f"{fmt.format(w.mean)} ± {fmt.format(w.stddev)} (n={w.count})"


def _fmt(name: str) -> str:
    if name == "token_usage":
        return "{:.1%}"  # a share of the KV cache
    return "{:.0f}" if name == "gen_throughput" else "{:.2f}"


def compare_record(configs: list[Configuration], pair: Pair, note: str = "") -> dict[str, Any]:
    top = best(configs)

    def window(w: WindowStats | None) -> dict[str, Any] | None:
        return dataclasses.asdict(w) if w is not None else None

    return {
        "configurations": [
            {
                "number": c.number,
                "flags": dict(c.flags),
                "status": c.status,
                "rolled_back": bool(c.rolled_back),
                "runs": [
                    {
                        "experiment": r.experiment,
                        "role": r.role,
                        "outcome": r.outcome,
                        "invocation": r.side.invocation,
                        "window": r.side.window,
                    }
                    for r in c.runs
                ],
                "windows": {name: window(c.window(name)) for name in SERIES},
            }
            for c in configs
        ],
        "best": top.number if top else None,
        "a": pair[0].number if pair else None,
        "b": pair[1].number if pair else None,
        "deltas": [
            {
                "series": d.name,
                "delta": d.delta,
                "spread": d.spread,
                "beyond_spread": d.beyond_spread,
            }
            for d in (compare(*pair) if pair else [])
        ],
        "note": note,
    }


def split_flags(configs: list[Configuration]) -> tuple[list[str], dict[str, Any]]:
    """(the flag names whose values differ between the configurations, in key order; the
    flags every configuration has with the same value). A narrow terminal then shows what
    tells the configurations apart instead of cutting it off after the flags they share."""
    names = sorted({name for c in configs for name in c.flags})
    shared: dict[str, Any] = {}
    differ: list[str] = []
    missing = object()
    for name in names:
        values = [c.flags.get(name, missing) for c in configs]
        if len(configs) > 1 and all(v is not missing and v == values[0] for v in values):
            shared[name] = values[0]
        else:
            differ.append(name)
    return differ, shared


def _only(flags: Any, names: list[str]) -> str:
    """`budget=16 cuda_graph=off` of just those names; `-` for a name the flags lack."""
    if not names:
        return "(same flags)"
    return " ".join(f"{n}={_value(flags, n)}" for n in names)


def render_compare(configs: list[Configuration], pair: Pair, note: str = "") -> RenderableType:
    top = best(configs)
    differ, shared = split_flags(configs)
    cells = [_only(c.flags, differ) for c in configs]
    table = Table(title="configurations")
    table.add_column("#")
    # Folded, never cut with "…": the flags that differ tell two configurations apart.
    table.add_column("configuration", overflow="fold")
    table.add_column("status", overflow="fold")
    table.add_column("runs")
    table.add_column("accept len", max_width=11)
    table.add_column("tok/s", max_width=11)
    for c, cell in zip(configs, cells, strict=True):
        mark = " (best)" if top is c else ""
        table.add_row(
            str(c.number),
            escape(cell) + mark,
            escape(c.status),
            str(len(c.invocations)),
            _stats(c.window("accept_len")),
            _stats(c.window("gen_throughput"), "{:.0f}"),
        )
    parts: list[RenderableType] = [table]
    if shared:
        parts.append(Text(f"in every configuration: {config_key(shared)}", style="dim"))
    if pair is not None:
        a, b = pair
        changed = [n for n in differ if a.flags.get(n) != b.flags.get(n) or n not in a.flags]
        moves = ", ".join(f"{n} {_value(a.flags, n)} → {_value(b.flags, n)}" for n in changed)
        side = Table(
            "",
            f"A: #{a.number}",
            f"B: #{b.number}",
            "Δ (B − A)",
            "2·SE",
            "beyond spread",
            title=f"#{a.number} → #{b.number}: {escape(moves or 'the same flags')}",
        )
        for d in compare(a, b):
            fmt = _fmt(d.name)
            side.add_row(
                LABELS[d.name],
                _stats(d.a, fmt),
                _stats(d.b, fmt),
                "-" if d.delta is None else fmt.replace("{:", "{:+").format(d.delta),
                "-" if d.spread is None else fmt.format(d.spread),
                _beyond(d),
            )
        parts.append(side)
    parts.append(
        Text(f"best: #{top.number} {top.key}")
        if top
        else Text("best: none (every tried configuration was rolled back)")
    )
    if note:
        parts.append(Text(note, style="dim"))
    return Group(*parts)


def _value(flags: Any, name: str) -> str:
    return value_text(flags[name]) if name in flags else "-"


def _beyond(d: Delta) -> str:
    if d.beyond_spread is None:
        return "-"
    return "yes" if d.beyond_spread else "no (within noise)"
