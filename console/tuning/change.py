"""One change, one path: every flag change and every rollback runs `change()`.

`specops set`, `specops rollback`, probation's rollback (in `watch` and the TUI alike) and the
TUI's flag editor and rollbacks used to build their own `Rollout` and write the audit and the
ledger themselves, and they disagreed (the CLI audited a rollback as "set"). Now each front
end plans and confirms, then calls `change()`, which runs the verified rollout (drop-in,
restart, health, smoke, soak, rollback on failure; the rollout writes the host's history
entry), then writes the audit action and records the experiment in the ledger, in that
order, and returns one `ChangeOutcome` that the CLI prints, `--json` serialises and the TUI
shows. The action is named (`ChangeAction`) alike in all three records.

Secrets never leave in the clear: the audit's intent and drop-in, the history entry and the
ledger record carry the profile's `secret = true` values as SECRET_MASK.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from console.hosts.events import ChangeAction, RolloutEvent, RolloutFinished
from console.ledger.ledger import NotOnHost, current_invocation, record_rollout, utc_now
from console.local.audit import AuditLog, action_record
from console.transport.ssh import HostSession, RemoteError
from console.tuning.plan import Plan
from console.tuning.rollout import Rollout, RolloutOptions

log = logging.getLogger(__name__)

ABANDONED = "abandoned half way"


@dataclass(frozen=True)
class ChangeOutcome:
    """How one change ended, as every front end reports it."""

    host: str
    action: ChangeAction
    intent: str
    """`budget 8 → 16` (secret values masked)."""
    result: RolloutFinished
    experiment: str | None = None
    """The ledger record's path on the host; None when it is not there (`not_recorded`)."""
    not_recorded: str | None = None
    """Why the host's ledger has no record of it (the console's cache may have one)."""

    @property
    def ok(self) -> bool:
        return self.result.ok

    def record(self) -> dict[str, Any]:
        """One JSON object (`specops set --json`): what changed, how it ended, where it is
        recorded."""
        result = self.result
        return {
            "host": self.host,
            "action": self.action.value,
            "intent": self.intent,
            "outcome": result.outcome.value,
            "reason": result.reason,
            "signature": result.signature,
            "stage": result.stage,
            "flags": result.flags,
            "invocation": result.invocation_id or None,
            "failed_invocation": result.failed_invocation,
            "accept_len": result.accept_len,
            "throughput_tok_s": result.throughput.mean_tok_s if result.throughput else None,
            "soaked_s": result.soaked_s,
            "rollback_error": result.rollback_error,
            "unreachable": result.unreachable,
            "history_entry": result.history_entry,
            "experiment": self.experiment,
            "not_recorded": self.not_recorded,
        }


def _audit(plan: Plan, action: ChangeAction, outcome: str) -> None:
    entry = action_record(plan.host, action.value, plan.summary(), outcome, plan.shown_dropin)
    AuditLog(secrets=plan.secrets).action(entry)


async def change(
    session: HostSession,
    plan: Plan,
    *,
    action: ChangeAction,
    on_event: Callable[[RolloutEvent], None] | None = None,
    source: str = "cli",
    rollback: bool = True,
    soak_s: float | None = None,
    cause: str = "",
    rollout: str = "",
) -> ChangeOutcome:
    """Apply `plan` on `session`'s host and record it: the history entry (by the rollout),
    then the audit action, then the ledger record.

    `source` names the console part in the ledger ("cli", "tui"); `rollback=False` leaves a
    failing setting in place (`set --no-rollback`); `cause` says why the console decided it
    (a probation rollback's crash); `rollout` names the group rollout it is part of.
    Cancelling it (Ctrl-C twice) audits the change as abandoned half way and re-raises; a
    remote failure never raises (it is the outcome)."""
    options = RolloutOptions(rollback=rollback, soak_s=soak_s, action=action, rollout=rollout)
    try:  # the run the change leaves, for the ledger
        before: str | None = await current_invocation(session)
    except (RemoteError, OSError):
        before = None
    started = utc_now()
    try:
        result = await Rollout(session, plan, on_event=on_event, options=options).run()
    except asyncio.CancelledError:
        _audit(plan, action, f"{ABANDONED} (cancelled)")
        raise
    except Exception as exc:  # a bug: recorded for the operator, then raised to the caller
        _audit(plan, action, f"stopped: {exc!r}")
        raise
    _audit(plan, action, result.summary())
    if result.untouched:  # the host never changed: an experiment of nothing would mislead
        return ChangeOutcome(plan.host, action, plan.summary(), result, None, "nothing changed")
    try:
        path = await record_rollout(
            session,
            plan,
            result,
            before_invocation=before,
            started=started,
            source=source,
            action=action,
            cause=cause,
            rollout=rollout,
        )
    except NotOnHost as exc:
        return ChangeOutcome(plan.host, action, plan.summary(), result, None, str(exc))
    except (RemoteError, OSError) as exc:
        return ChangeOutcome(plan.host, action, plan.summary(), result, None, str(exc))
    return ChangeOutcome(plan.host, action, plan.summary(), result, str(path))
