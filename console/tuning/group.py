"""One change to many hosts: a canary first, then waves, stopping at the first failure.

`specops set b300-1 b300-2 … budget=8` used to be a shell loop that did not stop when the
third host crashed. Here the hosts whose change would do something are split into waves —
the first `canary` hosts alone, then waves of `wave` hosts (a count, or a share of the rest)
— and each wave runs the one path of every change on its hosts at once (console/tuning/
change.py, action `group-set`: restart, health, smoke, soak, rollback on failure). A wave
starts only when every host of the one before has passed its soak; the first host that does
not end healthy on the new setting stops the rollout: hosts of its wave finish their own
change, no other host is touched. Pure bookkeeping and the loop: no output, no Textual.
"""

from __future__ import annotations

import asyncio
import math
import secrets
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from console.hosts.clock import SYSTEM, Clock
from console.hosts.events import ChangeAction, RolloutEvent, RolloutOutcome
from console.service.execline import FlagError
from console.transport.ssh import HostSession, RemoteError
from console.tuning.change import ChangeOutcome, change
from console.tuning.history import HistoryError
from console.tuning.plan import Plan
from console.tuning.rollback import RollbackError, prepare_rollback


def wave_size(text: str) -> Callable[[int], int]:
    """`--wave 3` or `--wave 25%`: how many hosts a wave takes, given how many are left after
    the canary (ValueError for anything else)."""
    if text.endswith("%"):
        share = float(text[:-1])
        if not 0 < share <= 100:
            raise ValueError(f"{text!r}: a share between 0 and 100 %")
        return lambda rest: max(1, math.ceil(rest * share / 100))
    count = int(text)
    if count < 1:
        raise ValueError(f"{text!r}: at least one host a wave")
    return lambda rest: count


def waves_of(plans: Sequence[Plan], canary: int, wave: Callable[[int], int]) -> list[list[Plan]]:
    """The canary hosts alone (each its own wave), then the rest in waves, in the given order."""
    head, rest = list(plans[:canary]), list(plans[canary:])
    waves = [[p] for p in head]
    size = wave(len(rest)) if rest else 1
    waves += [rest[i : i + size] for i in range(0, len(rest), size)]
    return waves


def same_diffs(plans: Sequence[Plan]) -> list[tuple[str, list[str]]]:
    """(diff, hosts) with hosts whose diff is the same grouped, in first-seen order."""
    grouped: dict[str, list[str]] = {}
    for plan in plans:
        grouped.setdefault(plan.diff, []).append(plan.host)
    return list(grouped.items())


@dataclass(frozen=True)
class WaveStarted:
    rollout: str
    number: int
    """1-based; the canary hosts' waves come first."""
    hosts: tuple[str, ...]
    at: float


@dataclass(frozen=True)
class WaveEnded:
    rollout: str
    number: int
    outcomes: tuple[ChangeOutcome, ...]
    at: float


GroupEvent = WaveStarted | WaveEnded


@dataclass
class GroupOutcome:
    rollout: str
    outcomes: list[ChangeOutcome] = field(default_factory=list)
    untouched: list[str] = field(default_factory=list)
    """Hosts the rollout never reached (it stopped before their wave)."""
    undone: list[ChangeOutcome] = field(default_factory=list)
    """`--all-or-nothing`: the rollbacks of hosts that were on the new setting when another
    failed."""
    undo_errors: dict[str, str] = field(default_factory=dict)
    """Hosts whose all-or-nothing rollback could not even be planned, and why."""

    @property
    def ok(self) -> bool:
        return not self.untouched and all(o.ok for o in self.outcomes)

    @property
    def on_new_setting(self) -> list[str]:
        """Hosts on the new setting now (applied, and not put back by all or nothing)."""
        back = {o.host for o in self.undone if o.ok}
        return [o.host for o in self.outcomes if o.ok and o.host not in back]

    @property
    def unreachable(self) -> bool:
        return any(o.result.unreachable for o in self.outcomes)

    def summary(self) -> list[tuple[str, bool]]:
        """What became of each host, a line per kind, and whether the line is alarming:
        on the new setting, rolled back (signature and stage), failed, never touched, put
        back or not by all or nothing."""
        lines = [(f"on the new setting: {', '.join(self.on_new_setting) or 'none'}", False)]
        for o in self.outcomes:
            if o.result.outcome is RolloutOutcome.ROLLED_BACK:
                why = ", ".join(x for x in (o.result.signature, o.result.stage) if x)
                lines.append((f"rolled back: {o.host} ({why or o.result.reason})", False))
        failed = [o.host for o in self.outcomes if o.result.outcome is RolloutOutcome.FAILED]
        if failed:
            lines.append((f"failed (not known healthy): {', '.join(failed)}", True))
        if self.untouched:
            lines.append((f"never touched: {', '.join(self.untouched)}", False))
        if undone := [o.host for o in self.undone if o.ok]:
            lines.append((f"put back (all or nothing): {', '.join(undone)}", False))
        for o in self.undone:
            if not o.ok:
                lines.append((f"could not be put back: {o.host} ({o.result.reason})", True))
        for host, why in self.undo_errors.items():
            lines.append((f"could not be put back: {host} ({why})", True))
        return lines


def new_rollout_id() -> str:
    return f"group-{secrets.token_hex(4)}"


async def group_change(
    sessions: Mapping[str, HostSession],
    waves: Sequence[Sequence[Plan]],
    *,
    rollout: str,
    soak_s: float | None = None,
    on_event: Callable[[RolloutEvent], None] | None = None,
    on_wave: Callable[[GroupEvent], None] | None = None,
    all_or_nothing: bool = False,
    action: ChangeAction = ChangeAction.GROUP_SET,
    clock: Clock = SYSTEM,
) -> GroupOutcome:
    """Run the waves in order, each host through `change()`; stop after the first wave in
    which a host did not end healthy on the new setting (`all_or_nothing`: then also put
    every host that is on the new setting back where it was, through a verified rollback)."""
    now = clock.time
    result = GroupOutcome(rollout)
    for number, wave in enumerate(waves, start=1):
        if result.outcomes and not all(o.ok for o in result.outcomes):
            result.untouched += [p.host for p in wave]
            continue
        if on_wave is not None:
            on_wave(WaveStarted(rollout, number, tuple(p.host for p in wave), now()))
        outcomes = await asyncio.gather(
            *(
                change(
                    sessions[plan.host],
                    plan,
                    action=action,
                    on_event=on_event,
                    soak_s=soak_s,
                    cause=f"rollout {rollout}, wave {number}",
                    rollout=rollout,
                )
                for plan in wave
            )
        )
        result.outcomes += outcomes
        if on_wave is not None:
            on_wave(WaveEnded(rollout, number, tuple(outcomes), now()))
    if all_or_nothing and not result.ok:
        failed = ", ".join(o.host for o in result.outcomes if not o.ok) or "none"
        applied = [o.host for o in result.outcomes if o.ok]
        undone = await asyncio.gather(
            *(
                _undo(
                    sessions[host],
                    f"rollout {rollout}: all or nothing, {failed} failed",
                    on_event=on_event,
                    soak_s=soak_s,
                    rollout=rollout,
                )
                for host in applied
            )
        )
        for host, done in zip(applied, undone, strict=True):
            if isinstance(done, str):
                result.undo_errors[host] = done
            else:
                result.undone.append(done)
    return result


async def _undo(
    session: HostSession,
    cause: str,
    *,
    on_event: Callable[[RolloutEvent], None] | None,
    soak_s: float | None,
    rollout: str,
) -> ChangeOutcome | str:
    """The host back on the configuration before the rollout (its history's newest good entry
    other than what runs now), verified like any rollback; a string says why it could not be
    planned."""
    try:
        found = await prepare_rollback(session)
    except (RollbackError, HistoryError, RemoteError, FlagError) as exc:
        return str(exc)
    return await change(
        session,
        found.plan,
        action=ChangeAction.ROLLBACK,
        on_event=on_event,
        soak_s=soak_s,
        cause=cause,
        rollout=rollout,
    )
