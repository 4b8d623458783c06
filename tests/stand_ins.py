"""Stand-ins for the parts a test does not exercise: the probation guard's change, whose
real path (console/tuning/change.py) the integration and UI tests run on simulated hosts."""

from __future__ import annotations

from typing import Any

from console.hosts.events import ChangeAction, RolloutFinished, RolloutOutcome
from console.transport.ssh import HostSession
from console.tuning.change import ChangeOutcome
from console.tuning.plan import Plan
from console.tuning.probation import ProbationCrash, ProbationGuard


class PlannedOnlyGuard(ProbationGuard):
    """A guard whose rollbacks are only planned: each plan is kept in `plans` and ends
    `healthy` (True: applied; False: failed) without touching the host."""

    def __init__(self, *args: Any, healthy: bool = True, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.plans: list[Plan] = []
        self.healthy = healthy

    async def _change(
        self, session: HostSession, plan: Plan, crash: ProbationCrash
    ) -> ChangeOutcome:
        self.plans.append(plan)
        outcome = RolloutOutcome.APPLIED if self.healthy else RolloutOutcome.FAILED
        result = RolloutFinished(plan.host, outcome)
        return ChangeOutcome(plan.host, ChangeAction.PROBATION_ROLLBACK, plan.summary(), result)
