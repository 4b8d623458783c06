"""A link that drops mid-rollback on a real host (issue 20, item 7: 7 of 21 fault runs
abandoned the rollback on its first command, the host left crash-looping on the new setting).
The link goes down the moment the rollback starts restoring (or the change's restart or
wait-ready starts) and comes back 3 s later, or sshd is killed (every connection reset); the
rollout must redo the idempotent steps once the session has really reconnected."""

from __future__ import annotations

import asyncio

import pytest

from console.hosts.events import RolloutEvent, RolloutOutcome, RolloutProgress, RolloutStep
from console.tuning.plan import parse_assignments, read_plan
from console.tuning.rollout import Rollout, RolloutOptions
from tests.testbed.bed import Testbed
from tests.testbed.helpers import connected
from tests.testbed.layout import UNIT
from tests.testbed.test_rollout import effective, running_argv

pytestmark = pytest.mark.testbed


STEPS = {
    "restore": (RolloutStep.RESTORE, True),
    "restart": (RolloutStep.RESTART, False),
    "wait-ready": (RolloutStep.READY, False),
}
"""Where the link goes: as the rollback restores, or during the change's restart or
wait-ready (the attack run's phases; budget 16 with CUDA graphs then crashes in start-up)."""


@pytest.mark.timeout(300)
@pytest.mark.parametrize("at", list(STEPS))
@pytest.mark.parametrize("fault", ["partition", "sshd-killed"])
async def test_a_link_dropped_during_the_rollback_still_ends_back_on_the_old_setting(
    bed: Testbed, fault: str, at: str
) -> None:
    host = bed.hosts[0]
    before = effective(host)
    session = await connected(bed.profile(host.name))
    tasks: list[asyncio.Task[None]] = []

    async def partition() -> None:
        if fault == "sshd-killed":  # the connection is reset; systemd starts sshd again
            await asyncio.to_thread(host.kill_sshd)
            return
        await asyncio.to_thread(host.link_down)
        await asyncio.sleep(3.0)
        await asyncio.to_thread(host.link_up)

    def on_event(event: RolloutEvent) -> None:
        step, rollback = STEPS[at]
        if not isinstance(event, RolloutProgress) or event.step is not step:
            return
        if event.state == "running" and event.rollback is rollback and not tasks:
            tasks.append(asyncio.create_task(partition()))

    try:
        plan = await read_plan(session, parse_assignments(session.profile, ["budget=16"]))
        options = RolloutOptions(poll_s=0.2, settle_s=5.0, soak_s=2.0, reconnect_s=30.0)
        result = await Rollout(session, plan, on_event=on_event, options=options).run()
        await asyncio.gather(*tasks)
    finally:
        await session.close()
    assert tasks, "the rollback never started"
    assert result.outcome is RolloutOutcome.ROLLED_BACK, (result.reason, result.rollback_error)
    assert effective(host).argv == before.argv
    assert running_argv(host) == tuple(before.argv)
    assert host.show(UNIT, "ActiveState")["ActiveState"] == "active"
    host.wait_healthy()
