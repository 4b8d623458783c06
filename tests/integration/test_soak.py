"""A change is good only when it stays up: crashes after ready are caught in the soak window.

The simulated hosts follow the real timeline (console/sim/failures.py): budget 16 with CUDA
graphs dies a few decode batches after ready, max running 256 under 200 requests dies in cuBLAS
a while later. Each must end rolled back onto the previous setting, with the stage named and
the seconds from ready to the crash, and the last good configuration left alone.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from console.hosts.events import RolloutEvent, RolloutOutcome, RolloutProgress, RolloutStep
from console.hosts.profiles import Profile, load_fleet
from console.service.status import read_status
from console.sim.failures import FailureTiming
from console.sim.fleet import SimFleet
from console.sim.sglang import Timing
from console.transport import http
from console.transport.ssh import HostSession
from console.tuning import history
from console.tuning.history import HistoryEntry
from console.tuning.rollout import RolloutOptions
from tests.integration.test_rollout import change as change_with
from tests.integration.test_rollout import connect

DROPIN = "/etc/systemd/system/sglang-k26-ddtree.service.d/zz-specops.conf"
LATE = FailureTiming(graph_crash="batches", crash_batches=4, requests=200, cublas_after_s=1.0)
SOAK = RolloutOptions(poll_s=0.2, settle_s=5.0, soak_s=3.0)


async def last_good(session: HostSession) -> HistoryEntry | None:
    """The host's last good configuration: its own history's answer."""
    return history.last_good(await history.load(session, session.profile.service.unit))


@pytest.fixture
async def late(tmp_path: Path) -> AsyncIterator[SimFleet]:
    timing = Timing(load_s=0.3, decode_interval_s=0.1, failures=LATE)
    fleet = SimFleet(tmp_path / "sim", hosts=1, timing=timing, keepalive_s=0.5)
    await fleet.start()
    yield fleet
    await fleet.stop()


@pytest.fixture
def profile(late: SimFleet) -> Profile:
    return load_fleet(late.profiles_dir)[0]


async def test_a_good_change_is_soaked_before_it_becomes_last_good(profile: Profile) -> None:
    session = await connect(profile)
    try:
        result, events = await change_with(session, "budget=4", options=SOAK)
        assert result.outcome is RolloutOutcome.APPLIED, result.reason
        assert result.soaked_s == 3.0
        soak = [e for e in events if isinstance(e, RolloutProgress) and e.step is RolloutStep.SOAK]
        countdown = [e.detail for e in soak if e.state == "waiting"]
        assert countdown and all("s left · accept len " in d for d in countdown[1:])
        assert soak[-1].state == "ok"
        # The soak came before the history entry that makes it the last good configuration.
        order = [e.step for e in events if isinstance(e, RolloutProgress) and e.state == "ok"]
        assert order.index(RolloutStep.SOAK) < len(order) - 1 - order[::-1].index(
            RolloutStep.HISTORY
        )
        good = await last_good(session)
        assert good is not None and good.invocation_id == result.invocation_id
        status = await read_status(session)
        assert status.invocation_id == result.invocation_id
    finally:
        await session.close()


@pytest.mark.parametrize(
    ("assignments", "signature", "after"),
    [
        (("budget=16",), "illegal_memory_access", (0.2, 1.5)),  # 4 batches of 0.1 s
        (("max_running=256",), "cublas", (1.0, 2.5)),  # > 128 running for 1 s
    ],
)
async def test_a_crash_after_ready_rolls_back_and_keeps_last_good(
    late: SimFleet,
    profile: Profile,
    assignments: tuple[str, ...],
    signature: str,
    after: tuple[float, float],
) -> None:
    session = await connect(profile)
    try:
        first, _ = await change_with(session, "budget=4", options=SOAK)
        assert first.outcome is RolloutOutcome.APPLIED, first.reason
        good = await last_good(session)
        assert good is not None

        result, _ = await change_with(session, *assignments, options=SOAK)
        assert result.outcome is RolloutOutcome.ROLLED_BACK, result.reason
        assert result.signature == signature
        assert result.stage == "soak"
        assert result.ready_to_crash_s is not None
        assert after[0] <= result.ready_to_crash_s <= after[1]
        assert "[soak, " in result.reason and "s after ready]" in result.reason
        assert result.exception_line is not None and "CUDA error" in result.exception_line
        # Back on the previous configuration (budget 4), healthy; last good untouched.
        status = await read_status(session)
        assert status.flags["budget"] == 4 and status.flags["max_running"] == 32
        assert status.invocation_id == result.invocation_id
        health = await http.request(session, profile.service.port, "GET", "/health")
        assert health.status == 200
        assert await last_good(session) == good
    finally:
        await session.close()


async def test_a_crash_in_capture_is_named_capture(tmp_path: Path) -> None:
    fleet = SimFleet(tmp_path / "sim", hosts=1, timing=Timing(load_s=0.3, decode_interval_s=0.1))
    await fleet.start()
    try:
        session = await connect(load_fleet(fleet.profiles_dir)[0])
        try:
            result, _ = await change_with(session, "budget=16", options=SOAK)
        finally:
            await session.close()
    finally:
        await fleet.stop()
    assert result.outcome is RolloutOutcome.ROLLED_BACK, result.reason
    assert (result.stage, result.ready_to_crash_s) == ("capture", None)
    assert result.reason.endswith("[capture]")


async def test_the_rollback_target_is_the_last_soaked_setting_not_the_previous_dropin(
    late: SimFleet, profile: Profile
) -> None:
    session = await connect(profile)
    try:
        kept, _ = await change_with(session, "budget=4", options=SOAK)
        assert kept.outcome is RolloutOutcome.APPLIED, kept.reason
        # A failing setting left in place (--no-rollback): the drop-in now says 256.
        no_rollback = RolloutOptions(poll_s=0.2, settle_s=5.0, soak_s=3.0, rollback=False)
        left, _ = await change_with(session, "max_running=256", options=no_rollback)
        assert left.outcome is RolloutOutcome.FAILED and left.signature == "cublas"
        result, _ = await change_with(session, "budget=16", options=SOAK)
        assert result.outcome is RolloutOutcome.ROLLED_BACK, result.reason
        status = await read_status(session)
        assert status.flags["budget"] == 4 and status.flags["max_running"] == 32  # entry 1
        assert status.active_state == "active" and status.invocation_id == result.invocation_id
    finally:
        await session.close()


async def test_a_last_good_that_crashes_too_falls_back_to_the_units_original(
    late: SimFleet, profile: Profile
) -> None:
    """The finding: "last good" was a crash-looping max running 256 (cuBLAS under 200
    requests); a rollback onto it reported healthy while NRestarts kept climbing."""
    session = await connect(profile)
    host = late.hosts[profile.name]
    try:
        short = RolloutOptions(poll_s=0.2, settle_s=5.0, soak_s=0.3)  # too short to see it
        kept, _ = await change_with(session, "max_running=256", options=short)
        assert kept.outcome is RolloutOutcome.APPLIED, kept.reason
        events: list[RolloutEvent] = []
        result, events = await change_with(session, "budget=16", options=SOAK)
        assert result.outcome is RolloutOutcome.ROLLED_BACK, result.reason
        assert "back on the unit's original configuration" in result.reason
        failed_too = [
            e.detail
            for e in events
            if isinstance(e, RolloutProgress) and e.rollback and e.state == "failed"
        ]
        assert any("history entry 1 (last good) failed too" in d for d in failed_too)
        assert not host.local(DROPIN).exists()
        status = await read_status(session)
        assert status.flags["budget"] == 8 and status.flags["max_running"] == 32
        assert result.flags["max_running"] == 32
        health = await http.request(session, profile.service.port, "GET", "/health")
        assert health.status == 200
    finally:
        await session.close()
