"""A link that drops during a rollback (issue 20, item 7): the rollout waits for the session to
really reconnect and redoes the idempotent step; if the link stays down it says loudly which
configuration the host is left on. Against a simulated host that falls off the network the
moment the rollback starts writing."""

from __future__ import annotations

import asyncio
import functools

import pytest

from console.cli import parse_args
from console.cli import set as cli_set
from console.hosts.events import (
    RolloutEvent,
    RolloutFinished,
    RolloutOutcome,
    RolloutProgress,
    RolloutStep,
    ServiceStatus,
)
from console.hosts.profiles import Profile
from console.service.status import read_status
from console.sim.fleet import SimFleet
from console.tuning import change as tuning_change
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


LOST_AT = [
    RolloutStep.RECORD,
    RolloutStep.WRITE,
    RolloutStep.DAEMON_RELOAD,
    RolloutStep.RESTART,
    RolloutStep.READY,
    RolloutStep.SMOKE,
    RolloutStep.SOAK,
]


async def set_losing_the_link_at(
    sim: SimFleet,
    step: RolloutStep,
    monkeypatch: pytest.MonkeyPatch,
    *extra: str,
    change: str = "budget=4",
    down_s: float | None = None,
) -> int:
    """`specops set b300 CHANGE --soak 3 --yes` while the host falls off the network as
    `step` starts, for `down_s` (None: for good); the exit status."""
    host = sim.hosts["b300"]
    reconnect_s = 1.5 if down_s is None else 20.0
    quick = functools.partial(RolloutOptions, reconnect_s=reconnect_s, poll_s=0.2, settle_s=2.0)

    async def drop() -> None:
        await host.go_offline()
        if down_s is not None:
            await asyncio.sleep(down_s)
            await host.go_online()

    monkeypatch.setattr(tuning_change, "RolloutOptions", quick)
    dropped: list[asyncio.Task[None]] = []

    class DropAt(cli_set.ProgressPrinter):
        def __call__(self, event: RolloutEvent) -> None:
            super().__call__(event)
            if (
                isinstance(event, RolloutProgress)
                and (event.step, event.state, event.rollback) == (step, "running", False)
                and not dropped
            ):
                dropped.append(asyncio.create_task(drop()))

    monkeypatch.setattr(cli_set, "ProgressPrinter", DropAt)
    args = parse_args(["set", "b300", change, "--soak", "3", "--yes", *extra])
    args.profiles = str(sim.profiles_dir)
    try:
        code = await cli_set.cmd_set(args)
    finally:
        await asyncio.gather(*dropped)
        if down_s is None:
            await host.go_online()
    assert dropped, f"{step} never started"
    return code


@pytest.mark.parametrize("step", LOST_AT, ids=[s.name.lower() for s in LOST_AT])
async def test_a_link_lost_for_good_in_any_phase_of_set_exits_3(
    sim: SimFleet,
    step: RolloutStep,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The change can neither complete nor be rolled back, so `set` exits 3 (unreachable),
    never 1 (the change failed), and says what it knows of the configuration left."""
    code = await set_losing_the_link_at(sim, step, monkeypatch)
    said = capsys.readouterr()
    assert code == 3, said.out + said.err
    assert "b300: FAILED" in said.out
    left_on = "left on" in said.out.lower()
    if step is RolloutStep.RECORD:
        assert "nothing was changed" in said.out
    elif step is RolloutStep.WRITE:  # the link went before or while the file was written
        assert left_on or "nothing changed" in said.out, said.out
    else:
        assert left_on, said.out


async def test_a_link_lost_with_no_rollback_exits_3_too(
    sim: SimFleet, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code = await set_losing_the_link_at(sim, RolloutStep.SMOKE, monkeypatch, "--no-rollback")
    said = capsys.readouterr()
    assert code == 3, said.out + said.err
    assert "not rolled back (--no-rollback): the new setting is in place" in said.out


BLIPS = [RolloutStep.DAEMON_RELOAD, RolloutStep.RESTART, RolloutStep.READY, RolloutStep.SMOKE]


@pytest.mark.parametrize("step", BLIPS, ids=[s.name.lower() for s in BLIPS])
async def test_a_link_that_blips_mid_change_still_ends_on_the_new_setting(
    sim: SimFleet,
    step: RolloutStep,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Down 1.5 s as `step` starts: the step is redone once the link is back, and a good
    change is kept (the drop is the link's, not the setting's)."""
    code = await set_losing_the_link_at(sim, step, monkeypatch, down_s=1.5)
    said = capsys.readouterr()
    assert code == 0, said.out + said.err
    assert "b300: applied budget 8 → 4; healthy" in said.out
    status = await read_status_of(sim)
    assert status.flags["budget"] == 4 and status.active_state == "active"


@pytest.mark.parametrize("step", [RolloutStep.RESTART, RolloutStep.READY], ids=["restart", "ready"])
async def test_a_crashing_change_whose_link_blips_is_still_rolled_back(
    sim: SimFleet,
    step: RolloutStep,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The attack run's case: budget 16 with CUDA graphs crash-loops; the link drops during
    the restart or wait-ready. The rollback still happens and ends on the old setting."""
    code = await set_losing_the_link_at(sim, step, monkeypatch, change="budget=16", down_s=1.5)
    said = capsys.readouterr()
    assert code == 1, said.out + said.err
    assert "b300: rolled back" in said.out and "back on budget=8" in said.out
    status = await read_status_of(sim)
    assert status.flags["budget"] == 8 and status.active_state == "active"


async def read_status_of(sim: SimFleet) -> ServiceStatus:
    from console.hosts.profiles import load_fleet

    (profile,) = [p for p in load_fleet(sim.profiles_dir) if p.name == "b300"]
    session = await connect(profile)
    try:
        return await read_status(session)
    finally:
        await session.close()


async def test_a_partition_the_keepalives_miss_does_not_end_the_rollback(
    sim: SimFleet, profiles: list[Profile]
) -> None:
    """The second attack run (issue 30): the link stalls as the rollback starts, for longer
    than a command may take, and the keepalives are too slow to notice (15 s × 3 by default).
    The command that hung for its whole timeout is not the end of the rollback: `reconnect_s`
    counts from that failure, the connection is made again once the link is back and the host
    ends on its old setting."""
    profile = profiles[0]
    slow_keepalives = profile.ssh.model_copy(update={"keepalive_interval_s": 60.0})
    profile = profile.model_copy(update={"ssh": slow_keepalives})
    host = sim.hosts[profile.name]
    session = await connect(profile)
    stalls: list[asyncio.Task[None]] = []

    async def stall() -> None:
        host.freeze()  # nothing arrives either way, nothing is reset
        await asyncio.sleep(5.0)
        host.thaw()

    def on_event(event: RolloutEvent) -> None:
        if not isinstance(event, RolloutProgress) or event.step is not RolloutStep.RESTORE:
            return
        if event.state == "running" and not stalls:
            stalls.append(asyncio.create_task(stall()))

    try:
        plan = await read_plan(session, parse_assignments(profile, ["budget=16"]))
        options = RolloutOptions(
            poll_s=0.2, settle_s=5.0, soak_s=1.0, reconnect_s=3.0, command_timeout_s=3.0
        )
        result = await Rollout(session, plan, on_event=on_event, options=options).run()
        await asyncio.gather(*stalls)
        assert stalls, "the rollback never started"
        assert result.outcome is RolloutOutcome.ROLLED_BACK, result.reason
        status = await read_status(session)
        assert status.flags["budget"] == 8 and status.active_state == "active"
    finally:
        host.thaw()
        await session.close()
