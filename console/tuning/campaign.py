"""A tuning campaign's grid: which cells, which are not worth running, how long it takes.

`specops sweep HOST budget=4,8,16 cuda_graph=on,off` is the seeds' operator's evening of
`set` after `set`, done by specops: the grid is the cartesian product of the values given
(the last name varies fastest), each cell a verified change (console/tuning/change.py) then
a measurement window. This module holds what is not the running: parsing and validating the
grid before any host is touched, which cells a crash makes pointless to try (a larger budget
with the same other flags as one that crashed) and the estimate shown before confirming. The
campaign's record on the host is console/ledger/campaigns.py.
"""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Mapping, Sequence

from console.hosts.profiles import FlagValue, Profile
from console.service.execline import FlagError
from console.tuning.history import HistoryEntry
from console.tuning.plan import parse_assignments

MAX_CELLS = 256


# --- the grid ------------------------------------------------------------------------------


def parse_grid(profile: Profile, axes: Sequence[str]) -> dict[str, list[FlagValue]]:
    """`["budget=4,8,16", "cuda_graph=on,off"]` → each flag's values, validated as `set`
    validates one (FlagError names the flag and value); no host is touched."""
    grid: dict[str, list[FlagValue]] = {}
    for axis in axes:
        name, sep, listed = axis.partition("=")
        name = name.strip()
        if not sep or not name or not listed.strip():
            raise FlagError("expected NAME=V1,V2,…", value=axis)
        if name in grid:
            raise FlagError("given more than once", flag=name, value=listed)
        if name in profile.secret_names:
            raise FlagError("a secret is no tuning parameter", flag=name)
        parsed: list[FlagValue] = []
        for text in listed.split(","):
            (value,) = parse_assignments(profile, [f"{name}={text.strip()}"]).values()
            if value in parsed:
                raise FlagError("value given twice", flag=name, value=text.strip())
            parsed.append(value)
        grid[name] = parsed
    if not grid:
        raise FlagError("nothing to sweep: give at least one NAME=V1,V2,…")
    cells = 1
    for values in grid.values():
        cells *= len(values)
    if cells > MAX_CELLS:
        raise FlagError(f"{cells} cells: at most {MAX_CELLS} in one campaign")
    return grid


def cells_of(grid: Mapping[str, Sequence[FlagValue]]) -> list[dict[str, FlagValue]]:
    """The grid's cells in order: the cartesian product, the last name varying fastest."""
    names = list(grid)
    return [dict(zip(names, combo, strict=True)) for combo in itertools.product(*grid.values())]


def beyond(
    cell: Mapping[str, FlagValue],
    crashed: Sequence[Mapping[str, FlagValue]],
    numeric: Sequence[str],
) -> tuple[str, Mapping[str, FlagValue]] | None:
    """(flag, crashed cell) when `cell` only goes further than a crashed cell along one
    numeric flag (larger, every other flag the same): not worth a restart. None otherwise."""
    for other in crashed:
        differing = [k for k in cell if cell[k] != other.get(k)]
        if len(differing) != 1 or differing[0] not in numeric:
            continue
        name = differing[0]
        mine, theirs = cell[name], other[name]
        if isinstance(mine, int | float) and isinstance(theirs, int | float) and mine > theirs:
            return name, other
    return None


def cell_seconds(entries: Sequence[HistoryEntry], soak_s: float, measure_s: float) -> float:
    """One cell's expected duration: the host's past changes' median (restart, load, smoke,
    soak), else a soak plus a minute for the restart; plus the measurement window."""
    spans = [
        e.finished_at - e.started_at
        for e in entries
        if e.finished_at is not None and e.outcome in ("kept", "rolled_back")
    ]
    change = statistics.median(spans) if spans else soak_s + 60.0
    return change + measure_s
