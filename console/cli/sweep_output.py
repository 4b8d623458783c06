"""What `specops sweep` prints: the plan before it starts, a line per cell as it ends (the
current step on a terminal's status line), the results table, and the `--json` record.
"""

from __future__ import annotations

import sys
from typing import Any

from rich.markup import escape
from rich.table import Table

from console.cli.common import err, out
from console.hosts.events import RolloutEvent, RolloutProgress
from console.ledger import campaigns
from console.ledger.campaigns import Campaign, Cell, cell_text
from console.service.flags import format_value
from console.tuning.campaign_start import remaining_s
from console.tuning.sweep import SweepEvent, SweepProgress

OUTCOME_STYLE = {
    "measured": "green",
    "baseline": "cyan",
    "crashed": "red",
    "failed": "bold red",
    "skipped": "dim",
}


def show_plan(campaign: Campaign, per_cell: float) -> None:
    left = [c for c in campaign.cells if c.outcome == "pending"]
    axes = "  ".join(
        f"{k}={','.join(format_value(x) for x in v)}" for k, v in campaign.grid.items()
    )
    minutes = remaining_s(campaign, per_cell) / 60
    out.print(
        f"{campaign.host}: campaign {campaign.id}: {escape(axes)}: {len(campaign.cells)} cells"
        + (f" ({len(left)} left)" if len(left) != len(campaign.cells) else ""),
        soft_wrap=True,
    )
    out.print(
        f"  starts from {escape(cell_text(campaign.start))}; about {minutes:.0f} min "
        f"(~{per_cell:.0f}s a cell: restart, soak, {campaign.measure_s:g}s measured); "
        f"ends on {'the fastest cell' if campaign.keep == 'best' else 'that configuration'}",
        soft_wrap=True,
    )
    for n, cell in enumerate(campaign.cells, start=1):
        mark = "" if cell.outcome == "pending" else f"  ({cell.outcome})"
        out.print(f"  {n:>3}  {escape(cell_text(cell.values))}{mark}", soft_wrap=True)


class CellPrinter:
    """A line per cell as it ends; the current step of a change on a terminal's status line."""

    def __init__(self, campaign: Campaign, *, several: bool = False) -> None:
        self.campaign = campaign
        self.tty = sys.stderr.isatty() and not several  # one status line: one campaign's
        self.prefix = f"{campaign.host}: " if several else ""
        self._status: Any = None
        self._cell = ""

    def __call__(self, event: SweepEvent) -> None:
        if not isinstance(event, SweepProgress):
            return
        where = "baseline" if event.index is None else f"cell {event.index + 1}/{event.total}"
        self._cell = f"{where} {cell_text(event.cell.values)}"
        if event.phase in ("changing", "measuring", "benchmarking", "ending"):
            self._show(f"{self._cell}: {event.phase}")
            return
        self.stop()
        cell = event.cell
        style = OUTCOME_STYLE.get(cell.outcome, "")
        text = f"{escape(self.prefix)}{where}  [{style}]{cell.outcome}[/{style}]  "
        text += escape(cell_text(cell.values))
        if cell.tok_s is not None:
            text += f"  accept {cell.accept_len or 0:.2f}  {cell.tok_s:.0f} tok/s (n={cell.n})"
        if cell.bench_tok_s is not None:
            text += f"  bench {cell.bench_tok_s:.0f} tok/s"
        elif cell.bench_detail:
            text += f"  [dim]bench: {escape(cell.bench_detail)}[/dim]"
        if cell.reason and cell.outcome != "measured":
            text += f"  [dim]{escape(cell.reason)}[/dim]"
        err.print(text, soft_wrap=True)

    def rollout(self, event: RolloutEvent) -> None:
        if isinstance(event, RolloutProgress) and event.state in ("running", "waiting"):
            back = "rollback: " if event.rollback else ""
            self._show(f"{self._cell}: {back}{event.step.value} {event.detail}")

    def _show(self, text: str) -> None:
        if not self.tty:
            return
        if self._status is None:
            self._status = err.status(escape(text))
            self._status.start()
        else:
            self._status.update(escape(text))

    def stop(self) -> None:
        if self._status is not None:
            self._status.stop()
            self._status = None


def show_results(campaign: Campaign) -> None:
    table = Table(title=f"{campaign.host} · campaign {campaign.id} · {campaign.state}")
    benched = bool(campaign.bench)
    columns = ["cell", "flags", "outcome", "accept len", "tok/s", "speedup"]
    columns += ["bench tok/s"] if benched else []
    for column in [*columns, "why"]:
        table.add_column(column, overflow="fold")
    for label, cell in campaigns.table_rows(campaign):
        figures = campaigns.cell_figures(campaign, cell)
        style = OUTCOME_STYLE.get(cell.outcome, "")
        table.add_row(
            label,
            escape(figures["flags"]),
            f"[{style}]{cell.outcome}[/{style}]" if style else cell.outcome,
            *[figures[c] for c in columns[3:]],
            escape(figures["why"]),
        )
    out.print(table)
    best = campaign.best()
    if best is not None:
        out.print(f"best stable: {escape(cell_text(best.values))} ({best.tok_s:.0f} tok/s)")
    out.print(f"{campaign.host}: {escape(campaign.end)}", soft_wrap=True)


def result_record(campaign: Campaign, state_dir: str) -> dict[str, Any]:
    """`--json`: the campaign as one object."""

    def cell(c: Cell) -> dict[str, Any]:
        return {
            "flags": c.values,
            "outcome": c.outcome,
            "stage": c.stage,
            "signature": c.signature,
            "reason": c.reason,
            "accept_len": c.accept_len,
            "accept_len_sd": c.accept_len_sd,
            "tok_s": c.tok_s,
            "tok_s_sd": c.tok_s_sd,
            "n": c.n,
            "speedup": campaign.speedup(c),
            "bench_tok_s": c.bench_tok_s,
            "bench_speedup": campaign.speedup(c, bench=True),
            "bench_detail": c.bench_detail,
            "bench_file": c.bench_file,
            "history_entry": c.history_entry,
        }

    best = campaign.best()
    return {
        "campaign": campaign.id,
        "host": campaign.host,
        "unit": campaign.unit,
        "state": campaign.state,
        "grid": campaign.grid,
        "start": campaign.start,
        "keep": campaign.keep,
        "bench": campaign.bench,
        "end": campaign.end,
        "baseline": cell(campaign.baseline) if campaign.baseline else None,
        "cells": [cell(c) for c in campaign.cells],
        "best": best.values if best else None,
        "path": campaigns.campaign_path(campaign.unit, campaign.id, state_dir),
    }
