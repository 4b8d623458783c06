"""The journal excerpt of a snapshot: the lines that matter, and never a crash cut short.

The seeds built excerpts with `journalctl --since … | grep -E PATTERNS | tail -200`, and the
grep lost the traceback around a crash. Here the whole window is read as JSON and filtered
locally: the last N entries matching the profile's patterns, plus a few entries either side of
every crash signature and every Python traceback (a start-up failure has no signature),
wherever it is in the window, never cut by N, plus journald's `Suppressed N messages`
notices (a known gap is evidence too). Skipped stretches are marked,
crash lines are labelled, and a header says what was read and how it was filtered.

Everything in the text comes from the entries themselves (UTC times, cursors), so the same
journal always gives the same bytes: an unchanged host yields an unchanged excerpt.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from console.hosts.events import JournalEntry
from console.watch.journal import LineFilter, assemble

TRACEBACK = "Traceback (most recent call last)"


@dataclass(frozen=True)
class Excerpt:
    text: str
    entries_read: int
    """Journal entries (lines) read."""
    records_kept: int
    first_cursor: str | None
    """Cursor of the first entry read (the window's start), None when the window was empty."""
    last_cursor: str | None
    crashes: tuple[str, ...]
    """The crash signature of every crash line in the window, in order."""


def _stamp(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _line(entry: JournalEntry) -> str:
    """A record: its first line stamped, the lines that continue it (a traceback) indented."""
    who = f"[{entry.pid}] " if entry.pid else ""
    first, *rest = entry.text.split("\n")
    return "\n".join([f"{_stamp(entry.timestamp)} {who}{first}", *(f"    {r}" for r in rest)])


def select(
    entries: Sequence[JournalEntry], patterns: Sequence[str], *, context: int, limit: int
) -> tuple[list[int], dict[int, str]]:
    """Indices of the records to keep (sorted), and the crash signature of each crash record.

    Matching is the journal view's own filter (`LineFilter`: any line of a record, and crash
    records and gap notices always pass), so the excerpt shows what the console showed.
    """
    shown = LineFilter(patterns)
    matched = [i for i, e in enumerate(entries) if shown.accepts(e)]
    keep = set(matched[-limit:] if limit > 0 else [])
    crashes: dict[int, str] = {}
    for i, entry in enumerate(entries):
        if entry.crash is not None:
            crashes[i] = entry.crash
        if entry.crash is not None or TRACEBACK in entry.text:
            # A traceback without a known signature (an import error, a bad argument at
            # start-up) is why a run never came up: kept with its context like a crash.
            keep.update(range(max(0, i - context), min(len(entries), i + context + 1)))
        if entry.dropped:
            keep.add(i)
    return sorted(keep), crashes


def build_excerpt(
    entries: Sequence[JournalEntry],
    *,
    host: str,
    unit: str,
    command: str,
    since: str,
    patterns: Sequence[str],
    context: int,
    limit: int,
) -> Excerpt:
    """The excerpt of `entries`, the journal lines one `journalctl -o json` read (`command`)
    returned. They are assembled into records first, so a traceback stays with its header."""
    records = assemble(entries)
    kept, crashes = select(records, patterns, context=context, limit=limit)
    first = entries[0].cursor if entries else None
    last = entries[-1].cursor if entries else None
    grep = "|".join(patterns)
    rough = f"journalctl -u {shlex.quote(unit)} --since {shlex.quote(since)} -o short-iso"
    if patterns:
        rough += f" | grep -E {shlex.quote(grep)} | tail -n {limit}"
    counts: dict[str, int] = {}
    for name in crashes.values():
        counts[name] = counts.get(name, 0) + 1
    header = [
        f"# specops journal excerpt · host {host} · unit {unit}",
        f"# read with: {command}",
        f"# read {len(entries)} journal entries ({len(records)} records: a record is one logged",
        f"#   message, its traceback lines included), cursor {first or '-'} … {last or '-'}",
        f"# kept {len(kept)} records: the last {limit} that match the profile's journal patterns,",
        f"#   {context} records either side of every crash signature (never cut by that limit),",
        "#   and journald's 'Suppressed N messages' notices; times are UTC",
        f"# patterns: {', '.join(map(repr, patterns)) or '(none)'}",
        f"# roughly the same as: {rough}",
        "# crash signatures: "
        + (", ".join(f"{name} ×{n}" for name, n in counts.items()) or "none"),
    ]
    body: list[str] = []
    previous = -1
    for i in kept:
        if i - previous > 1:
            body.append(f"-- {i - previous - 1} records not shown --")
        if i in crashes:
            body.append(f"-- crash signature: {crashes[i]} --")
        body.append(_line(records[i]))
        previous = i
    if records and previous < len(records) - 1:
        body.append(f"-- {len(records) - 1 - previous} records not shown --")
    return Excerpt(
        text="\n".join(header + body) + "\n",
        entries_read=len(entries),
        records_kept=len(kept),
        first_cursor=first,
        last_cursor=last,
        crashes=tuple(crashes.values()),
    )
