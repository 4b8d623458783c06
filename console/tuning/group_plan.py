"""The plan of one change to many hosts, made before any host is touched: `set HOST…` on the
CLI and the TUI's flag editor over marked hosts both start here.

Every host's own plan is read from the host (its unit, its build's flags, its history for a
rollback); any refusal refuses the whole rollout, naming the host: a bad value or a flag the
host's build does not know (FlagError), hosts on different SGLang releases or GPU models
unless `mixed` (GroupRefused). Hosts already on the target are skipped; the others are split
into the canary hosts and the waves (console/tuning/group.py). No output, no Textual.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field

from console.hosts.profiles import FlagValue
from console.service.execline import FlagError
from console.service.gpu_model import read_gpu_model, unlike
from console.transport.ssh import HostSession, RemoteError
from console.tuning import campaign as grids
from console.tuning import group, history
from console.tuning.history import HistoryError
from console.tuning.plan import Plan

Planner = Callable[[HostSession], Awaitable[Plan]]
"""One host's plan, read from the host (FlagError / RollbackError refuse the whole rollout)."""


class GroupRefused(ValueError):
    """The hosts may not take one change together (different releases or GPUs; the CLI's
    `--mixed` goes on regardless)."""


@dataclass(frozen=True)
class GroupPlan:
    """Every host's plan, and the order they go in."""

    plans: tuple[Plan, ...]
    """All hosts, in the order given (the canary first)."""
    waves: tuple[tuple[Plan, ...], ...]
    """The hosts that change, the canary hosts each in a wave of their own first."""
    canary: int
    seconds: Mapping[str, float] = field(default_factory=dict)
    """Each changing host's expected change (restart, load, smoke, soak): the median of its
    past changes, else its soak and a minute."""

    @property
    def estimated_s(self) -> float:
        """The whole rollout: the waves one after another, each as long as its slowest host."""
        return sum(max(self.seconds.get(p.host, 0.0) for p in wave) for wave in self.waves)

    @property
    def todo(self) -> list[Plan]:
        return [p for p in self.plans if p.changed]

    @property
    def skipped(self) -> list[Plan]:
        """Hosts already on the target: not restarted."""
        return [p for p in self.plans if not p.changed]

    @property
    def changed(self) -> bool:
        return bool(self.waves)

    @property
    def hosts(self) -> list[str]:
        return [p.host for p in self.plans]

    @property
    def old_values(self) -> Mapping[str, FlagValue]:
        """The values the first host runs now (the editor shows them as "current")."""
        return self.plans[0].old_values if self.plans else {}

    @property
    def diff(self) -> str:
        """Every diff once, headed by the hosts it is theirs (hosts alike grouped)."""
        parts = [
            f"# {', '.join(hosts)}\n{diff.rstrip()}" for diff, hosts in group.same_diffs(self.todo)
        ]
        return "\n".join(parts) + "\n" if parts else ""

    def wave_label(self, number: int) -> str:
        """`canary 1` or `wave 3` (1-based, as the events number them)."""
        return f"{'canary' if number <= self.canary else 'wave'} {number}"

    def wave_lines(self) -> list[str]:
        return [
            f"{self.wave_label(n)}: {', '.join(p.host for p in members)}"
            for n, members in enumerate(self.waves, start=1)
        ]

    def summary(self) -> str:
        todo, waves = len(self.todo), len(self.waves)
        text = f"{todo} of {counted(len(self.plans), 'host')} in {counted(waves, 'wave')}"
        if self.skipped:
            text += f" ({', '.join(p.host for p in self.skipped)} already on it)"
        if self.seconds:
            text += f", about {minutes(self.estimated_s)}"
        first = self.todo[0].summary() if self.todo else "nothing to change"
        return f"{first}; {text}"


def counted(n: int, what: str) -> str:
    """`1 host`, `3 hosts`."""
    return f"{n} {what}" if n == 1 else f"{n} {what}s"


def minutes(seconds: float) -> str:
    """`40s`, `3 min`: a rollout's expected length."""
    return f"{seconds:.0f}s" if seconds < 90 else f"{seconds / 60:.0f} min"


async def plan_group(
    sessions: Mapping[str, HostSession],
    hosts: Sequence[str],
    planner: Planner,
    *,
    canary: int = 1,
    wave: Callable[[int], int] | None = None,
    mixed: bool = False,
    soak_s: float | None = None,
) -> GroupPlan:
    """Every host's plan and the waves; FlagError / HistoryError / RollbackError /
    RemoteError name the host they come from, GroupRefused says which hosts differ."""
    if canary < 1:
        raise GroupRefused(f"canary {canary}: at least 1 host goes first")

    async def one(host: str) -> Plan:
        try:
            return await planner(sessions[host])
        except (FlagError, HistoryError) as exc:
            raise type(exc)(f"{host}: {exc}") from None  # (a RollbackError names it)

    plans = list(await asyncio.gather(*(one(h) for h in hosts)))
    releases = {p.host: p.release or "unknown" for p in plans}
    if len(set(releases.values())) > 1 and not mixed:
        listed = ", ".join(f"{h} {r}" for h, r in releases.items())
        raise GroupRefused(f"hosts on different SGLang releases ({listed})")
    found = await asyncio.gather(*(read_gpu_model(sessions[p.host]) for p in plans))
    models = {p.host: model for p, model in zip(plans, found, strict=True)}
    if (gpus := unlike(models)) is not None and not mixed:
        raise GroupRefused(f"hosts with different GPUs ({gpus})")
    todo = [p for p in plans if p.changed]
    waves = group.waves_of(todo, canary, wave or group.wave_size("25%"))
    took = await asyncio.gather(*(_change_seconds(sessions[p.host], soak_s) for p in todo))
    seconds = {p.host: s for p, s in zip(todo, took, strict=True)}
    return GroupPlan(tuple(plans), tuple(tuple(w) for w in waves), canary, seconds)


async def _change_seconds(session: HostSession, soak_s: float | None) -> float:
    service = session.profile.service
    try:
        entries = await history.load(session, service.unit)
    except (HistoryError, RemoteError):
        entries = []
    return grids.cell_seconds(entries, service.soak_s if soak_s is None else soak_s, 0.0)
