"""The findings report's group rollouts: one change to many hosts, read back as one.

Every host's record of a group rollout (`specops set HOST HOST…`, console/tuning/group.py)
carries the rollout's id (the ledger's `rollout` field), so the experiments a snapshot
mirrored into `experiments/HOST/` are gathered here by it: per host the change it got, how
that ended, the accept length after it, and what came later in the same rollout — an
all-or-nothing undo, or a probation rollback (a crash after the change was kept). Then one
line for the fleet: "budget=4 kept on 2 of 2 hosts: accept len 4.38 ± 0.05 across them; no
probation rollback". Only the package's files are read: the same package gives the same
section byte for byte.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from console.hosts.events import ChangeAction
from console.ledger.campaigns import cell_text
from console.ledger.ledger import Experiment

Found = tuple[str, str, Experiment]
"""(host, package path, experiment)."""


def _changed(experiment: Experiment) -> dict[str, Any]:
    before, after = experiment.before.flags, experiment.after.flags
    return {k: v for k, v in after.items() if before.get(k) != v}


def _outcome(experiment: Experiment) -> str:
    if experiment.kept:
        return "kept"
    words = "rolled back" if experiment.outcome == "rolled_back" else experiment.outcome
    why = ", ".join(w for w in (experiment.signature, experiment.phase) if w)
    return f"{words} ({why})" if why else words


def _accept(experiment: Experiment) -> tuple[str, float | None]:
    stats = experiment.after.windows.get("accept_len")
    if stats is None:
        return "-", None
    return f"{stats.mean:.2f} ± {stats.stddev:.2f} (n={stats.count})", stats.mean


def _later(experiment: Experiment) -> str:
    if experiment.what is ChangeAction.PROBATION_ROLLBACK:
        return f"probation rollback: {experiment.cause or experiment.reason}"
    return f"put back: {experiment.cause or experiment.reason}"


def rollout_lines(
    found: Sequence[Found],
    link: Callable[[str], str],
    md: Callable[[object], str],
) -> list[str]:
    """The `## Group rollouts` section; empty when no record names a rollout."""
    rollouts: dict[str, list[Found]] = {}
    for item in sorted(found, key=lambda f: (f[2].started, f[0], f[1])):
        if item[2].rollout:
            rollouts.setdefault(item[2].rollout, []).append(item)
    if not rollouts:
        return []
    lines = ["## Group rollouts", ""]
    for rollout, records in rollouts.items():
        first: dict[str, Found] = {}
        then: dict[str, list[Found]] = {}
        for item in records:  # each host's first record is its change; the rest came after
            if item[0] in first:
                then.setdefault(item[0], []).append(item)
            else:
                first[item[0]] = item
        lines += [
            f"### Rollout {md(rollout)}",
            "",
            "| host | change | outcome | accept len after | then |",
            "|---|---|---|---|---|",
        ]
        accepts: list[float] = []
        for host, (_, rel, experiment) in first.items():
            text, mean = _accept(experiment)
            after = then.get(host, [])
            if experiment.kept and mean is not None and not after:
                accepts.append(mean)
            later = "; ".join(f"{md(_later(e))} ({link(r)})" for _, r, e in after) or "-"
            lines.append(
                f"| {md(host)} | {md(cell_text(_changed(experiment)))} ({link(rel)}) | "
                f"{md(_outcome(experiment))} | {text} | {later} |"
            )
        lines += ["", _summary(first, then, accepts, md), ""]
    return lines


def _summary(
    first: Mapping[str, Found],
    then: Mapping[str, Sequence[Found]],
    accepts: Sequence[float],
    md: Callable[[object], str],
) -> str:
    changes = {cell_text(_changed(e)) for _, _, e in first.values()}
    what = changes.pop() if len(changes) == 1 else "the change"
    stayed = [h for h, (_, _, e) in first.items() if e.kept and not then.get(h)]
    probation = sum(
        e.what is ChangeAction.PROBATION_ROLLBACK for items in then.values() for _, _, e in items
    )
    text = f"{md(what)} kept on {len(stayed)} of {len(first)} hosts"
    if accepts:
        spread = statistics.stdev(accepts) if len(accepts) > 1 else 0.0
        text += f": accept len {statistics.fmean(accepts):.2f} ± {spread:.2f} across them"
    rollbacks = {0: "no probation rollback", 1: "1 probation rollback"}
    return f"{text}; {rollbacks.get(probation, f'{probation} probation rollbacks')}."
