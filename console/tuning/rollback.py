"""Where a rollback goes, worked out from the host's own history before anything changes.

`specops rollback` and the TUI (`R`, and `enter` / `o` in the history view) share this: the
default target is the newest configuration that survived its soak and is not what runs now
(never merely "the previous drop-in"); `to=N` is history entry N; `original=True` is the
unit with no specops drop-in. The result is an ordinary `Plan`, so the rollback then goes
through the same diff, confirmation and verified rollout as a change.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from console.hosts.profiles import FlagValue, Profile
from console.transport import remote
from console.transport.ssh import HostSession
from console.tuning import history
from console.tuning.history import HistoryEntry
from console.tuning.plan import Plan, check_arguments, make_plan, original_plan


class RollbackError(Exception):
    """No such target: the entry does not exist, or no earlier good configuration does."""


@dataclass(frozen=True)
class RollbackPlan:
    plan: Plan
    target: HistoryEntry | None
    """The history entry gone back to; None: the unit's own configuration (`--original`)."""

    @property
    def label(self) -> str:
        """`back to history entry 3 (kept, alice@laptop)`."""
        if self.target is None:
            return "back to the unit's own configuration (no specops drop-in)"
        target = self.target
        return f"back to history entry {target.n} ({target.outcome}, {target.who or '?'})"


def entry_plan(profile: Profile, cat_text: str, target: HistoryEntry) -> Plan:
    """Pure: the plan that puts history entry `target` back (no drop-in: the original)."""
    if target.dropin is None:
        return original_plan(profile, cat_text)
    # Secret values are masked in the history: those stay as the unit has them now.
    values = {k: v for k, v in target.values.items() if k not in profile.secret_names}
    return make_plan(profile, cat_text, values)


def choose_target(
    host: str,
    entries: Sequence[HistoryEntry],
    current: Mapping[str, FlagValue],
    to: int | None,
) -> HistoryEntry:
    """Entry `to`, or the newest good one that is not what runs now (RollbackError if none)."""
    if to is not None:
        target = next((e for e in entries if e.n == to), None)
        if target is None:
            numbers = ", ".join(str(e.n) for e in entries)
            raise RollbackError(f"{host}: no history entry {to} (there are {numbers})")
        return target
    target = history.rollback_target(entries, current)
    if target is None:
        raise RollbackError(f"{host}: no earlier good configuration in its history")
    return target


async def read_rollback(
    session: HostSession, *, to: int | None = None, original: bool = False
) -> RollbackPlan:
    """Read the unit and the host's history (read-only) and plan the rollback."""
    profile = session.profile
    unit = profile.service.unit
    cat = (await session.run(remote.systemctl_cat(unit), timeout=30)).stdout
    if original:
        return RollbackPlan(original_plan(profile, cat), None)
    entries = await history.load(session, unit)
    if not entries:
        dropin_path = original_plan(profile, cat).dropin_path
        entries = [history.original_entry(profile, cat, dropin_path)]
    current = history.running_values(profile, cat)
    target = choose_target(profile.name, entries, current, to)
    return RollbackPlan(entry_plan(profile, cat, target), target)


async def prepare_rollback(
    session: HostSession, *, to: int | None = None, original: bool = False
) -> RollbackPlan:
    """`read_rollback`, checked against the build when the profile asks (as `prepare`)."""
    found = await read_rollback(session, to=to, original=original)
    if found.plan.changed and session.profile.service.check_flags:
        await check_arguments(session, found.plan)
    return found
