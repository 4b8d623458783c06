"""The findings report's campaign section: each tuning campaign's grid as a table.

From the records a snapshot mirrored into `campaigns/HOST/` (console/ledger/campaigns.py):
every cell with its outcome (crashed ones marked with their signature and stage), accept
length and tok/s with their spread, the speedup against the campaign's baseline, the best
stable cell, and the crash boundary in words — each crash beside the nearest cell that ran
with every other flag the same ("budget 16 crashed (illegal_memory_access, soak) where 4 ran,
with cuda_graph=on"). Only the package's files are read, so the same package gives the same
section byte for byte. A campaign recorded more than once (it changed between snapshots) is
reported from its newest record.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from console.hosts.profiles import FlagValue
from console.ledger.campaigns import Campaign, Cell, cell_text
from console.service.flags import format_value

Link = Callable[[str], str]
"""A package path → a Markdown link to it from the report."""
Text = Callable[[object], str]
"""Text → Markdown-safe text."""

MARK = {"crashed": "**crashed**", "failed": "**failed**", "skipped": "skipped"}


def newest(found: Sequence[tuple[str, Campaign]]) -> list[tuple[str, Campaign]]:
    """Each campaign once, from its newest record (by when it was last written)."""
    latest: dict[str, tuple[str, Campaign]] = {}
    for rel, campaign in sorted(found, key=lambda item: (item[1].updated_at, item[0])):
        latest[campaign.id] = (rel, campaign)
    return sorted(latest.values(), key=lambda item: item[1].created_at)


def _numbers(value: float | None, spread: float | None, digits: int) -> str:
    if value is None:
        return "-"
    return f"{value:.{digits}f} ± {spread or 0:.{digits}f}"


def boundary(campaign: Campaign) -> list[str]:
    """Each crash beside the cell that ran nearest to it along one numeric flag."""
    ran = [c for c in campaign.cells if c.outcome == "measured"]
    found: list[str] = []
    for crash in (c for c in campaign.cells if c.outcome == "crashed"):
        why = ", ".join(x for x in (crash.signature, crash.stage) if x) or "crashed"
        nearest: tuple[str, FlagValue, dict[str, FlagValue]] | None = None
        for cell in ran:
            differing = [k for k in crash.values if crash.values[k] != cell.values.get(k)]
            if len(differing) != 1:
                continue
            name = differing[0]
            mine, theirs = crash.values[name], cell.values[name]
            if not (isinstance(mine, int | float) and isinstance(theirs, int | float)):
                continue
            if theirs < mine and (nearest is None or theirs > nearest[1]):  # type: ignore[operator]
                rest = {k: v for k, v in crash.values.items() if k != name}
                nearest = (name, theirs, rest)
        if nearest is None:
            found.append(f"{cell_text(crash.values)} crashed ({why})")
            continue
        name, theirs, rest = nearest
        others = f", with {cell_text(rest)}" if rest else ""
        found.append(
            f"{name} {format_value(crash.values[name])} crashed ({why}) where "
            f"{format_value(theirs)} ran{others}"
        )
    return found


def campaign_lines(
    host: str, found: Sequence[tuple[str, Campaign]], link: Link, md: Text
) -> list[str]:
    """The Markdown of the host's campaigns ([] when it has none)."""
    lines: list[str] = []
    for rel, campaign in newest(found):
        grid = "  ".join(
            f"{k}={','.join(format_value(v) for v in values)}"
            for k, values in campaign.grid.items()
        )
        lines += [
            f"### Campaign {md(campaign.id)} on {md(host)}",
            "",
            f"{md(grid)}: {len(campaign.cells)} cells, {md(campaign.state)}; "
            f"{campaign.measure_s:g} s measured a cell; {md(campaign.end) or 'no end recorded'}. "
            f"Record: {link(rel)}.",
            "",
            "| cell | flags | outcome | accept len | tok/s | speedup |",
            "|---|---|---|---|---|---|",
        ]
        rows: list[tuple[str, Cell]] = (
            [("baseline", campaign.baseline)] if campaign.baseline else []
        )
        rows += [(str(n), c) for n, c in enumerate(campaign.cells, start=1)]
        for label, cell in rows:
            shown = {k: v for k, v in cell.values.items() if k in campaign.grid}
            outcome = MARK.get(cell.outcome, cell.outcome)
            if cell.outcome == "crashed":
                outcome += f" ({md(cell.signature or '?')}, {md(cell.stage or '?')})"
            lines.append(
                f"| {label} | {md(cell_text(shown))} | {outcome} | "
                f"{_numbers(cell.accept_len, cell.accept_len_sd, 2)} | "
                f"{_numbers(cell.tok_s, cell.tok_s_sd, 0)} | {campaign.speedup_text(cell)} |"
            )
        lines.append("")
        best = campaign.best()
        if best is not None:
            shown = {k: v for k, v in best.values.items() if k in campaign.grid}
            lines.append(
                f"Best stable cell: {md(cell_text(shown))}, {best.tok_s or 0:.0f} tok/s "
                f"({campaign.speedup_text(best)} the baseline)."
            )
        for sentence in boundary(campaign):
            lines.append(f"Crash boundary: {md(sentence)}.")
        lines.append("")
    return lines
