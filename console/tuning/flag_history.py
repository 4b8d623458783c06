"""What this host's history says about each flag: its last good value, and values it crashed with.

The flag editor shows it beside each value, so someone about to try budget 16 with CUDA
graphs sees "crashed 16" on that row before pressing `y`. From two sources: the last good
configuration of the host's own history (console/tuning/history.py) and the crashes the console
has seen (with the flags their run had, console/watch/monitor.py). A crashed value is one
that differed from the last good configuration, or, without one, from the values running
now (with neither, every value of the crashed run is listed: which caused it is unknown).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from console.hosts.profiles import FlagValue
from console.service.flags import format_value


def flag_history(
    names: Iterable[str],
    last_good: Mapping[str, FlagValue] | None,
    crashed_runs: Iterable[Mapping[str, FlagValue]],
    *,
    good: bool = True,
) -> dict[str, str]:
    """Flag name → `good 8 · crashed 16, 32` (empty when nothing is known).

    `last_good` is the baseline crashed values are told from; with `good=False` it is only
    that (the values running now, say) and is not shown as `good`.
    """
    runs = list(crashed_runs)
    history: dict[str, str] = {}
    for name in names:
        parts: list[str] = []
        if good and last_good is not None and name in last_good:
            parts.append(f"good {format_value(last_good[name])}")
        crashed: list[str] = []
        for run in runs:
            if name not in run:
                continue
            if last_good is not None and last_good.get(name) == run[name]:
                continue
            shown = format_value(run[name])
            if shown not in crashed:
                crashed.append(shown)
        if crashed:
            parts.append("crashed " + ", ".join(crashed))
        history[name] = " · ".join(parts)
    return history
