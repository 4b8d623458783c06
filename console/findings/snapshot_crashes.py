"""The crashes a snapshot's journal excerpt shows, each attached to the run that had it.

An excerpt covers a window of the journal (`journal_since`), which often holds earlier runs
of the service beside the one running when the snapshot was taken; a crash of an earlier
run is evidence about that run's configuration, not the current one's. The current run
starts at its first journal entry (the `t=` realtime field of the snapshot's
`invocation.first_cursor`, in every snapshot format), and each crash line in the excerpt
carries its UTC time; crashes before that start are marked `earlier`.

Pure: reads the package's files it is given; no Textual.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from console.watch.phase import last_phase
from console.watch.signatures import crash_signature

_CRASH_MARK = re.compile(r"^-- crash signature: (\S+) --$")
_STAMPED = re.compile(r"^(?P<stamp>\d{4}-\d\d-\d\dT\S+Z) (?:\[[^\]]*\] )?(?P<message>.*)$")


@dataclass(frozen=True)
class Crash:
    signature: str
    phase: str
    line: str
    evidence: str
    """`path#Lnnn` of the crash line in the excerpt."""
    at: float | None = None
    """When it was logged (UTC seconds), from the excerpt's stamp."""
    earlier: bool = False
    """Logged before the run the snapshot saw started: a crash of an earlier run."""


def _stamp(text: str) -> float | None:
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def excerpt_crashes(package: Path, rel: str, run_start: float | None = None) -> list[Crash]:
    """Every crash line an excerpt marks, with the phase its earlier lines put the server in;
    those logged before `run_start` are `earlier`."""
    try:
        lines = (package / rel).read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return []
    crashes: list[Crash] = []
    messages: list[str] = []
    for number, line in enumerate(lines, start=1):
        mark = _CRASH_MARK.match(line)
        if mark is not None and number < len(lines):
            # The record follows the mark: its first line, then its traceback indented.
            first = _STAMPED.match(lines[number])
            record = [(number + 1, first.group("message") if first else lines[number])]
            for later in range(number + 1, len(lines)):
                if not lines[later].startswith("    "):
                    break
                record.append((later + 1, lines[later].strip()))
            name = mark.group(1)
            at, text = next(((n, t) for n, t in record if crash_signature(t) == name), record[0])
            when = _stamp(first.group("stamp")) if first else None
            earlier = run_start is not None and when is not None and when < run_start
            crash = Crash(name, last_phase(messages), text, f"{rel}#L{at}", when, earlier)
            crashes.append(crash)
            continue
        stamped = _STAMPED.match(line)
        if stamped is not None:
            messages.append(stamped.group("message"))
    return crashes


def run_start(record: Mapping[str, Any]) -> float | None:
    """When the run a snapshot saw logged its first entry: the realtime (µs, hex) in its
    first cursor; None when the snapshot names no run."""
    invocation = record.get("invocation")
    cursor = invocation.get("first_cursor") if isinstance(invocation, Mapping) else None
    if not isinstance(cursor, str):
        return None
    fields = dict(part.split("=", 1) for part in cursor.split(";") if "=" in part)
    try:
        return int(fields["t"], 16) / 1e6
    except (KeyError, ValueError):
        return None


def excerpt_path(record: Mapping[str, Any]) -> str | None:
    for artifact in record.get("artifacts", []):
        path = artifact.get("path") if isinstance(artifact, dict) else None
        if isinstance(path, str) and path.rsplit("/", 1)[-1].startswith("journal_excerpt"):
            return path
    return None


def snapshot_crashes(
    package: Path, snapshots: Sequence[tuple[str, dict[str, Any]]]
) -> list[tuple[str, dict[str, Any], list[Crash]]]:
    """Each snapshot with the crashes its excerpt shows (earlier runs' marked)."""
    found = []
    for rel, record in snapshots:
        excerpt = excerpt_path(record)
        crashes = excerpt_crashes(package, excerpt, run_start(record)) if excerpt else []
        found.append((rel, record, crashes))
    return found
