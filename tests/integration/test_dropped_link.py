"""A link that drops during a rollback (issue 20, item 7): the rollout waits for the session to
really reconnect and redoes the idempotent step; if the link stays down it says loudly which
configuration the host is left on. Against a simulated host that falls off the network the
moment the rollback starts writing."""

from __future__ import annotations

import asyncio

from console.events import (
    RolloutEvent,
    RolloutFinished,
    RolloutOutcome,
    RolloutProgress,
    RolloutStep,
)
from console.profiles import Profile
from console.service.status import read_status
from console.sim.fleet import SimFleet
from console.tuning.plan import parse_assignments, read_plan
from console.tuning.rollout import Rollout, RolloutOptions
from tests.integration.test_rollout import connect


async def crash_with_the_link_dropping(
    sim: SimFleet, profile: Profile, *, down_s: float | None, reconnect_s: float
) -> RolloutFinished:
    host = sim.hosts[profile.name]
    session = await connect(profile)
    tasks: list[asyncio.Task[None]] = []

    async def drop() -> None:
        await host.go_offline()
        if down_s is not None:
            await asyncio.sleep(down_s)
            await host.go_online()

    def on_event(event: RolloutEvent) -> None:
        if not isinstance(event, RolloutProgress) or event.step is not RolloutStep.RESTORE:
            return
        if event.state == "running" and not tasks:
            tasks.append(asyncio.create_task(drop()))

    plan = await read_plan(session, parse_assignments(profile, ["budget=16"]))
    options = RolloutOptions(poll_s=0.2, settle_s=5.0, soak_s=1.0, reconnect_s=reconnect_s)
    rollout = Rollout(session, plan, on_event=on_event, options=options)
    try:
        result = await rollout.run()
        await asyncio.gather(*tasks)
        if down_s is not None:
            assert await session.wait_connected(10)
            status = await read_status(session)
            assert status.flags["budget"] == 8 and status.active_state == "active"
    finally:
        await session.close()
    assert tasks, "the rollback never started"
    return result


async def test_a_link_that_comes_back_within_reconnect_s_still_rolls_back(
    sim: SimFleet, profiles: list[Profile]
) -> None:
    result = await crash_with_the_link_dropping(sim, profiles[0], down_s=1.5, reconnect_s=20.0)
    assert result.outcome is RolloutOutcome.ROLLED_BACK, result.reason
    assert result.unreachable is False


async def test_a_link_that_stays_down_says_which_setting_the_host_is_left_on(
    sim: SimFleet, profiles: list[Profile]
) -> None:
    result = await crash_with_the_link_dropping(sim, profiles[0], down_s=None, reconnect_s=2.0)
    assert result.outcome is RolloutOutcome.FAILED
    assert result.unreachable is True
    error = result.rollback_error or ""
    assert "could not roll back within reconnect_s=2s" in error
    assert "LEFT ON THE FAILED SETTING" in error and "budget=16" in error
