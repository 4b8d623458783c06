"""Flag changes end to end against simulated hosts: apply, crash detection, rollback, sudo."""

from __future__ import annotations

import pytest

from console.hosts.events import (
    RolloutEvent,
    RolloutFinished,
    RolloutJournal,
    RolloutOutcome,
    RolloutProgress,
    RolloutStep,
)
from console.hosts.profiles import Profile
from console.service.execline import FlagError
from console.service.status import read_status
from console.sim.fleet import SimFleet
from console.transport import http
from console.transport.ssh import CommandRecord, HostSession
from console.tuning import history
from console.tuning.plan import check_arguments, parse_assignments, read_plan
from console.tuning.rollout import Rollout, RolloutOptions

UNIT = "sglang-k26-ddtree.service"
DROPIN = f"/etc/systemd/system/{UNIT}.d/zz-specops.conf"
QUICK = RolloutOptions(poll_s=0.2, settle_s=5.0)
CHANGING: tuple[str, ...] = ("tee ", "mv ", "rm ", "mkdir ", "systemctl daemon-reload")
CHANGING += ("systemctl restart", "systemctl reset-failed")


async def connect(profile: Profile, records: list[CommandRecord] | None = None) -> HostSession:
    session = HostSession(profile, on_command=records.append if records is not None else None)
    session.start()
    assert await session.wait_connected(10)
    return session


async def change(
    session: HostSession, *assignments: str, options: RolloutOptions = QUICK
) -> tuple[RolloutFinished, list[RolloutEvent]]:
    changes = parse_assignments(session.profile, list(assignments))
    plan = await read_plan(session, changes)
    await check_arguments(session, plan)
    events: list[RolloutEvent] = []
    result = await Rollout(session, plan, on_event=events.append, options=options).run()
    return result, events


def steps(events: list[RolloutEvent], *, rollback: bool) -> list[RolloutStep]:
    return [
        e.step
        for e in events
        if isinstance(e, RolloutProgress) and e.state == "ok" and e.rollback is rollback
    ]


async def test_budget_16_with_cuda_graphs_crashes_and_rolls_back(
    sim: SimFleet, profiles: list[Profile]
) -> None:
    session = await connect(profiles[0])
    host = sim.hosts[profiles[0].name]
    try:
        result, events = await change(session, "budget=16")
        assert result.outcome is RolloutOutcome.ROLLED_BACK
        assert result.signature == "illegal_memory_access"
        assert result.phase == "CUDA graph capture"
        assert "crash" in result.reason
        assert any("illegal memory access" in line for line in result.excerpt)
        assert any("Capture cuda graph begin" in line for line in result.excerpt)
        assert result.flags["budget"] == 8
        # The new invocation's own lines were streamed while it ran.
        watched = [line for e in events if isinstance(e, RolloutJournal) for line in e.lines]
        assert any("Scheduler hit an exception" in line for line in watched)
        assert steps(events, rollback=True) == [  # a rollback is verified like a change
            RolloutStep.RESTORE,
            RolloutStep.DAEMON_RELOAD,
            RolloutStep.VERIFY,
            RolloutStep.RESET_FAILED,
            RolloutStep.RESTART,
            RolloutStep.INVOCATION,
            RolloutStep.READY,
            RolloutStep.SMOKE,
            RolloutStep.SETTLE,
            RolloutStep.SOAK,
        ]
        # Back on the unit's own command: our drop-in is gone, the server is healthy on 8.
        assert not host.local(DROPIN).exists()
        status = await read_status(session)
        assert status.flags["budget"] == 8 and status.flags["cuda_graph"] is True
        assert status.active_state == "active" and status.invocation_id == result.invocation_id
        health = await http.request(session, profiles[0].service.port, "GET", "/health")
        assert health.status == 200
        good = history.last_good(await history.load(session, UNIT))
        assert good is not None and good.kind == "original"  # nothing new worked
    finally:
        await session.close()


async def test_budget_16_without_cuda_graphs_ends_healthy_on_the_new_setting(
    sim: SimFleet, profiles: list[Profile]
) -> None:
    session = await connect(profiles[0])
    host = sim.hosts[profiles[0].name]
    try:
        result, events = await change(session, "budget=16", "cuda_graph=false")
        assert result.outcome is RolloutOutcome.APPLIED, result.reason
        assert result.flags["budget"] == 16 and result.flags["cuda_graph"] is False
        assert steps(events, rollback=False) == [
            RolloutStep.HISTORY,  # entry N started
            RolloutStep.RECORD,
            RolloutStep.WRITE,
            RolloutStep.DAEMON_RELOAD,
            RolloutStep.VERIFY,
            RolloutStep.RESTART,
            RolloutStep.INVOCATION,
            RolloutStep.READY,
            RolloutStep.SMOKE,
            RolloutStep.SETTLE,
            RolloutStep.SOAK,
            RolloutStep.HISTORY,  # entry N kept
        ]
        # The accept length is the new invocation's (budget 16, eager: 5.3–6.4).
        assert result.accept_len is not None and 5.3 <= result.accept_len <= 6.4
        status = await read_status(session)
        assert status.invocation_id == result.invocation_id
        assert status.flags["budget"] == 16 and status.flags["cuda_graph"] is False
        dropin = host.local(DROPIN).read_text()
        assert "ExecStart=\n" in dropin and "--speculative-num-draft-tokens 16" in dropin
        assert "--disable-cuda-graph" in dropin
        assert not any(p.name.endswith(".tmp") for p in host.local(DROPIN).parent.iterdir())
        written = [
            c for c in host.commands if c.startswith(("tee ", "mv ")) and "/etc/systemd" in c
        ]
        assert written[0].startswith(f"tee -- /etc/systemd/system/{UNIT}.d/.zz-specops.conf.tmp")
        assert written[1] == (
            f"mv -f -- /etc/systemd/system/{UNIT}.d/.zz-specops.conf.tmp {DROPIN}"
        )
        good = history.last_good(await history.load(session, UNIT))
        assert good is not None and good.invocation_id == result.invocation_id
        assert good.values["budget"] == 16 and good.dropin == dropin
    finally:
        await session.close()


async def test_budget_32_wrong_smoke_answer_restores_the_previous_dropin(
    sim: SimFleet, profiles: list[Profile]
) -> None:
    session = await connect(profiles[0])
    host = sim.hosts[profiles[0].name]
    try:
        first, _ = await change(session, "budget=16", "cuda_graph=off")
        assert first.outcome is RolloutOutcome.APPLIED, first.reason
        before = host.local(DROPIN).read_text()
        result, _ = await change(session, "budget=32")
        assert result.outcome is RolloutOutcome.ROLLED_BACK
        assert "smoke test" in result.reason and "expected '4'" in result.reason
        assert result.flags["budget"] == 16
        assert host.local(DROPIN).read_text() == before  # the previous drop-in, byte for byte
        status = await read_status(session)
        assert status.flags["budget"] == 16 and status.active_state == "active"
        good = history.last_good(await history.load(session, UNIT))
        assert good is not None and good.values["budget"] == 16
    finally:
        await session.close()


async def test_no_rollback_leaves_the_failed_setting_in_place(
    sim: SimFleet, profiles: list[Profile]
) -> None:
    session = await connect(profiles[0])
    host = sim.hosts[profiles[0].name]
    try:
        options = RolloutOptions(poll_s=0.2, settle_s=5.0, rollback=False)
        result, events = await change(session, "budget=32", options=options)
        assert result.outcome is RolloutOutcome.FAILED
        assert result.rollback_error is not None and "--no-rollback" in result.rollback_error
        assert steps(events, rollback=True) == []
        assert "--speculative-num-draft-tokens 32" in host.local(DROPIN).read_text()
    finally:
        await session.close()


async def test_unit_edited_after_the_diff_is_refused_untouched(
    sim: SimFleet, profiles: list[Profile]
) -> None:
    session = await connect(profiles[0])
    host = sim.hosts[profiles[0].name]
    try:
        plan = await read_plan(session, {"budget": 4})
        fragment = host.local(f"/etc/systemd/system/{UNIT}")
        fragment.write_text(fragment.read_text().replace("--tp 8", "--tp 4"))
        sent = len(host.commands)
        result = await Rollout(session, plan, options=QUICK).run()
        assert result.outcome is RolloutOutcome.FAILED
        assert "changed since the diff" in result.reason and "nothing was changed" in result.reason
        assert not any(c.startswith(CHANGING) for c in host.commands[sent:])
    finally:
        await session.close()


async def test_flag_existence_check_refuses_an_argument_the_build_does_not_know(
    sim: SimFleet, profiles: list[Profile]
) -> None:
    profile = profiles[0]
    renamed = profile.flags["budget"].model_copy(update={"arg": "--speculative-ddtree-budget"})
    profile = profile.model_copy(update={"flags": {**profile.flags, "budget": renamed}})
    session = await connect(profile)
    host = sim.hosts[profile.name]
    try:
        plan = await read_plan(session, parse_assignments(profile, ["budget=16"]))
        with pytest.raises(FlagError, match="does not know --speculative-ddtree-budget"):
            await check_arguments(session, plan)
        assert host.commands[-1] == ("/opt/sglang/venv/bin/python3 -m sglang.launch_server --help")
        assert not any(c.startswith(CHANGING) for c in host.commands)
        # The arguments the build does know pass.
        ok = await read_plan(session, parse_assignments(profile, ["max_running=16", "nvls=on"]))
        assert await check_arguments(session, ok) == [
            "--max-running-requests",
            "--enable-nccl-nvls",
        ]
    finally:
        await session.close()


async def test_sudo_mode_sends_every_privileged_command_through_sudo(
    sim: SimFleet, profiles: list[Profile]
) -> None:
    profile = profiles[0]
    profile = profile.model_copy(update={"ssh": profile.ssh.model_copy(update={"sudo": True})})
    records: list[CommandRecord] = []
    session = await connect(profile, records)
    host = sim.hosts[profile.name]
    try:
        result, _ = await change(session, "budget=16")  # crash, then rollback: every verb
        assert result.outcome is RolloutOutcome.ROLLED_BACK
        privileged = [c for c in host.commands if c.startswith("sudo ")]
        verbs = {
            " ".join(c.split()[3:5]) if " systemctl " in c else c.split()[3] for c in privileged
        }
        assert verbs == {
            "sh",  # reads the host's history, /var/lib/specops/UNIT/history.json
            "mkdir",
            "install",  # the drop-in and the state files made 0600 before they are written
            "tee",
            "mv",
            "rm",
            "systemctl daemon-reload",
            "systemctl restart",
            "systemctl reset-failed",
        }
        assert all(c.startswith("sudo -n -- ") for c in privileged)
        assert not any(c.startswith(CHANGING) for c in host.commands)  # none without sudo
        assert sorted(r.command for r in records) == sorted(host.commands)  # streams log at end
    finally:
        await session.close()


async def test_bad_values_are_refused_before_any_io(profiles: list[Profile]) -> None:
    profile = profiles[0]
    for bad in ("budget=8; rm -rf /", "budget=-1", "nosuchflag=1", "budget", "=3", "budget=1e9"):
        with pytest.raises(FlagError):
            parse_assignments(profile, [bad])
    assert parse_assignments(profile, ["budget= 16 ", "cuda_graph=off"]) == {
        "budget": 16,
        "cuda_graph": False,
    }


async def test_a_dropped_link_while_waiting_is_ridden_out(
    sim: SimFleet, profiles: list[Profile]
) -> None:
    session = await connect(profiles[0])
    host = sim.hosts[profiles[0].name]
    dropped: list[RolloutEvent] = []

    def drop_once(event: RolloutEvent) -> None:
        if isinstance(event, RolloutProgress) and event.state == "waiting" and not dropped:
            dropped.append(event)
            host.abort_connections()

    try:
        changes = parse_assignments(session.profile, ["budget=16", "cuda_graph=off"])
        plan = await read_plan(session, changes)
        result = await Rollout(session, plan, on_event=drop_once, options=QUICK).run()
        assert dropped, "the link was never dropped"
        assert result.outcome is RolloutOutcome.APPLIED, result.reason
        assert result.accept_len is not None and 5.3 <= result.accept_len <= 6.4
    finally:
        await session.close()


async def test_a_dropin_sorting_after_ours_is_caught_before_the_restart(
    sim: SimFleet, profiles: list[Profile]
) -> None:
    session = await connect(profiles[0])
    host = sim.hosts[profiles[0].name]
    try:
        local = host.local(f"/etc/systemd/system/{UNIT}.d/zzz-local.conf")
        local.parent.mkdir(parents=True, exist_ok=True)
        fragment = host.local(f"/etc/systemd/system/{UNIT}").read_text()
        execstart = fragment[fragment.index("ExecStart=") : fragment.index("Restart=")]
        local.write_text(f"[Service]\nExecStart=\n{execstart}")
        invocation = host.unit.invocation_id
        result, events = await change(session, "budget=16", "cuda_graph=off")
        assert result.outcome is RolloutOutcome.ROLLED_BACK
        assert "zzz-local.conf" in result.reason and "not the planned one" in result.reason
        assert RolloutStep.RESTART not in steps(events, rollback=False)  # caught before it
        assert not host.local(DROPIN).exists()
        status = await read_status(session)
        assert status.flags["budget"] == 8 and status.active_state == "active"
        assert status.invocation_id == invocation  # never restarted: the old server kept going
        assert RolloutStep.RESTART not in steps(events, rollback=True)
    finally:
        await session.close()
