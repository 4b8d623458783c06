"""Configurations side by side, from the experiment ledger: is B better than A, beyond noise?

Every experiment contributes two runs: the configuration it left (its last minutes) and the
one it tried (from its first decode line on). Runs of the same flag values are one
configuration; their windows are pooled exactly (counts, means and variances combine). A
difference between two configurations counts as larger than the run-to-run spread when it
exceeds twice its standard error, `2·sqrt(sa²/na + sb²/nb)`. A configuration any experiment
rolled back (a crash signature, a garbled smoke answer) is marked so and never "best"; so is
one a rollback left (`specops rollback`, or probation rolling back a change that had passed
its soak): the configuration that rollback gave up.

Pure: no I/O, no Textual.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from console.hosts.events import ChangeAction
from console.ledger.ledger import SERIES, Experiment, Side, WindowStats

BEST_BY = "gen_throughput"
"""What "best" maximises among configurations never rolled back."""


def value_text(value: Any) -> str:
    """A flag value as a configuration names it: switches `on`/`off`."""
    if isinstance(value, bool):
        return "on" if value else "off"
    return str(value)


def config_key(flags: Mapping[str, Any]) -> str:
    """`budget=8 cuda_graph=on`: a configuration by its flag values, in a stable order."""
    return " ".join(f"{k}={value_text(v)}" for k, v in sorted(flags.items())) or "(no flags)"


def pool(stats: Sequence[WindowStats]) -> WindowStats | None:
    """One window over the samples of several (exact count, mean and variance)."""
    stats = [s for s in stats if s.count]
    if not stats:
        return None
    if len(stats) == 1:
        return stats[0]
    n = sum(s.count for s in stats)
    mean = math.fsum(s.count * s.mean for s in stats) / n
    within = math.fsum((s.count - 1) * s.stddev**2 for s in stats)
    between = math.fsum(s.count * (s.mean - mean) ** 2 for s in stats)
    stddev = math.sqrt((within + between) / (n - 1)) if n > 1 else 0.0
    # Percentiles do not pool; the median of the runs' medians is the honest summary left.
    return WindowStats(
        count=n,
        mean=mean,
        stddev=stddev,
        p50=sorted(s.p50 for s in stats)[len(stats) // 2],
        p10=min(s.p10 for s in stats),
        p90=max(s.p90 for s in stats),
        min=min(s.min for s in stats),
        max=max(s.max for s in stats),
    )


@dataclass(frozen=True)
class Run:
    """One invocation of a configuration as an experiment saw it."""

    experiment: int
    """1-based position of the experiment in the ledger."""
    role: str
    """"before" (the configuration the change left) or "after" (the one it tried)."""
    outcome: str
    side: Side
    reason: str = ""
    kind: str = "change"
    """The experiment's kind: "change" or "rollback"."""
    signature: str = ""
    """The crash that ended this run, when one did (a change's crash, or the crash probation
    rolled back from)."""

    @property
    def rolled_back(self) -> bool:
        """A change that did not stay, or what a rollback that did stay gave up."""
        if self.role == "after":
            return self.outcome != "kept"
        return self.kind == "rollback" and self.outcome == "kept"

    @property
    def crashed(self) -> bool:
        return self.rolled_back and bool(self.signature)


@dataclass
class Configuration:
    number: int
    key: str
    flags: Mapping[str, Any]
    runs: list[Run] = field(default_factory=list)

    @property
    def verdict(self) -> Run | None:
        """The run that decides the configuration's one outcome wherever it is shown (compare,
        the TUI, the report): its last crash, whenever that was (a configuration that crashed
        is never a candidate again), else the newest change to it or rollback away from it —
        so one rolled back and later chosen again and kept is kept. None when it was only
        ever changed from."""
        crashes = [r for r in self.runs if r.crashed]
        if crashes:
            return crashes[-1]
        decided = [r for r in self.runs if r.role == "after" or r.rolled_back]
        return decided[-1] if decided else None

    @property
    def rolled_back(self) -> bool:
        verdict = self.verdict
        return verdict is not None and verdict.rolled_back

    @property
    def status(self) -> str:
        verdict = self.verdict
        if verdict is None:
            return "before a change"
        if verdict.rolled_back:
            return f"rolled back: {verdict.reason or verdict.outcome}"
        return "kept"

    @property
    def invocations(self) -> list[Run]:
        """One run per invocation: a run seen by two experiments (the after of one, the before
        of the next) is counted once, with the window that holds more of it."""
        by_invocation: dict[str, Run] = {}
        for i, run in enumerate(self.runs):
            key = run.side.invocation or f"#{i}"
            seen = by_invocation.get(key)
            if seen is None or _size(run) > _size(seen):
                by_invocation[key] = run
        return list(by_invocation.values())

    def window(self, name: str) -> WindowStats | None:
        return pool([w for r in self.invocations if (w := r.side.windows.get(name)) is not None])


def _size(run: Run) -> int:
    return max((w.count for w in run.side.windows.values()), default=0)


@dataclass(frozen=True)
class Delta:
    name: str
    a: WindowStats | None
    b: WindowStats | None

    @property
    def delta(self) -> float | None:
        return None if self.a is None or self.b is None else self.b.mean - self.a.mean

    @property
    def spread(self) -> float | None:
        """Twice the standard error of the difference of the means."""
        if self.a is None or self.b is None:
            return None
        return 2 * math.sqrt(self.a.stddev**2 / self.a.count + self.b.stddev**2 / self.b.count)

    @property
    def beyond_spread(self) -> bool | None:
        delta, spread = self.delta, self.spread
        if delta is None or spread is None:
            return None
        return abs(delta) > spread


def configurations(experiments: Sequence[Experiment]) -> list[Configuration]:
    """Every configuration the ledger saw, numbered in order of first appearance."""
    found: dict[str, Configuration] = {}
    for i, experiment in enumerate(experiments, start=1):
        for role, side in (("before", experiment.before), ("after", experiment.after)):
            key = config_key(side.flags)
            config = found.get(key)
            if config is None:
                config = found[key] = Configuration(len(found) + 1, key, dict(side.flags))
            if role == "after":
                reason, signature = _reason(experiment), experiment.signature or ""
            else:
                reason, signature = _given_up(experiment), _probation_crash(experiment)
            config.runs.append(
                Run(i, role, experiment.outcome, side, reason, experiment.kind, signature)
            )
    return list(found.values())


def _reason(experiment: Experiment) -> str:
    if experiment.kept:
        return ""
    parts = [experiment.signature or experiment.reason or experiment.outcome]
    if experiment.signature and experiment.phase:
        parts.append(f"during {experiment.phase}")
    return " ".join(parts)


def _given_up(experiment: Experiment) -> str:
    """Why a rollback left the configuration it ran from ("" for a change)."""
    if experiment.kind != "rollback":
        return ""
    probation = experiment.what is ChangeAction.PROBATION_ROLLBACK
    who = "probation" if probation else "`specops rollback`"
    return f"{experiment.cause} (by {who})" if experiment.cause else f"by {who}"


def _probation_crash(experiment: Experiment) -> str:
    """The crash probation rolled back from ("" for anything else)."""
    if experiment.kind == "rollback" and experiment.what is ChangeAction.PROBATION_ROLLBACK:
        return experiment.cause
    return ""


def best(configs: Sequence[Configuration], by: str = BEST_BY) -> Configuration | None:
    """The configuration with the highest mean `by` that no experiment rolled back."""
    candidates = [(c, w) for c in configs if not c.rolled_back and (w := c.window(by))]
    if not candidates:
        return None
    return max(candidates, key=lambda cw: (cw[1].mean, -cw[0].number))[0]


def compare(a: Configuration, b: Configuration) -> list[Delta]:
    return [Delta(name, a.window(name), b.window(name)) for name in SERIES]


def default_pair(
    experiments: Sequence[Experiment], configs: Sequence[Configuration]
) -> tuple[Configuration, Configuration] | None:
    """The newest experiment's before and after configurations."""
    if not experiments:
        return None
    last = experiments[-1]
    by_key = {c.key: c for c in configs}
    return by_key[config_key(last.before.flags)], by_key[config_key(last.after.flags)]
