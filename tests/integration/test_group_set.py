"""One change to many simulated hosts: a canary, then waves, each starting only once the one
before has passed its soak; the first failure stops the rollout and leaves the later waves'
hosts untouched; `set` over several hosts refuses mixed releases and says who ended where."""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from console.cli import parse_args
from console.cli import rollback as cli_rollback
from console.cli import set as cli_set
from console.cli.snapshot import cmd_snapshot
from console.findings.report import build_report
from console.hosts.events import RolloutEvent, RolloutProgress, RolloutStep
from console.hosts.profiles import load_fleet
from console.service.status import read_status
from console.sim.fleet import SimFleet
from console.sim.sglang import Timing
from console.transport.ssh import HostSession
from console.tuning import group
from console.tuning.plan import parse_assignments, read_plan
from tests.integration.test_rollout import connect

HISTORY = "/var/lib/specops/sglang-k26-ddtree.service/history.json"

HOSTS = 8
CHANGING = ("systemctl restart", "tee ", "mv ")


@pytest.fixture
async def fleet(tmp_path: Path) -> AsyncIterator[SimFleet]:
    sim = SimFleet(
        tmp_path / "sim",
        hosts=HOSTS,
        timing=Timing(load_s=0.3, decode_interval_s=0.1),
        versions=("0.5.23",),
    )
    await sim.start()
    yield sim
    await asyncio.wait_for(sim.stop(), 10)


async def rollout(
    sim: SimFleet, *assignments: str, all_or_nothing: bool = False
) -> tuple[group.GroupOutcome, list[group.GroupEvent], dict[str, float]]:
    profiles = load_fleet(sim.profiles_dir)
    sessions: dict[str, HostSession] = {}
    for profile in profiles:
        sessions[profile.name] = await connect(profile)
    loop = asyncio.get_running_loop()
    waves_seen: list[group.GroupEvent] = []
    soaked: dict[str, float] = {}

    def step(event: RolloutEvent) -> None:
        if isinstance(event, RolloutProgress) and (event.step, event.state) == (
            RolloutStep.SOAK,
            "ok",
        ):
            soaked[event.host] = loop.time()

    try:
        plans = [
            await read_plan(sessions[p.name], parse_assignments(p, list(assignments)))
            for p in profiles
        ]
        waves = group.waves_of(plans, 1, group.wave_size("3"))
        ended = await group.group_change(
            sessions,
            waves,
            rollout="group-test",
            on_event=step,
            on_wave=waves_seen.append,
            all_or_nothing=all_or_nothing,
        )
    finally:
        await asyncio.gather(*(s.close() for s in sessions.values()))
    return ended, waves_seen, soaked


async def test_no_wave_starts_before_every_host_of_the_one_before_passed_its_soak(
    fleet: SimFleet,
) -> None:
    ended, events, soaked = await rollout(fleet, "budget=4")
    assert ended.ok and len(ended.outcomes) == HOSTS
    started = [e for e in events if isinstance(e, group.WaveStarted)]
    assert [len(e.hosts) for e in started] == [1, 3, 3, 1]  # the canary, then waves of 3
    for before, after in itertools.pairwise(started):
        assert all(soaked[h] <= after.at for h in before.hosts), (before, after)
    assert all(o.result.history_entry is not None for o in ended.outcomes)


async def test_a_failure_in_wave_two_stops_the_rollout_before_wave_three(fleet: SimFleet) -> None:
    names = [p.name for p in load_fleet(fleet.profiles_dir)]  # the rollout's order
    fleet.hosts[names[2]].lacks.add("journalctl")  # wave 2's second host cannot be changed
    ended, events, _ = await rollout(fleet, "budget=4")
    assert not ended.ok
    assert [o.host for o in ended.outcomes if not o.ok] == [names[2]]
    assert ended.untouched == names[4:]
    assert len([e for e in events if isinstance(e, group.WaveStarted)]) == 2
    for name in names[4:]:  # never touched: no write, no restart
        assert not any(c.startswith(CHANGING) for c in fleet.hosts[name].commands), name
    assert all(o.ok for o in ended.outcomes if o.host in (names[0], names[1], names[3]))


async def test_all_or_nothing_puts_back_the_hosts_already_changed(
    fleet: SimFleet, tmp_path: Path
) -> None:
    names = [p.name for p in load_fleet(fleet.profiles_dir)]
    fleet.hosts[names[2]].lacks.add("journalctl")  # wave 2's second host cannot be changed
    ended, _, _ = await rollout(fleet, "budget=4", all_or_nothing=True)
    assert not ended.ok and ended.untouched == names[4:]
    changed = [names[0], names[1], names[3]]  # the canary and wave 2's other hosts
    assert sorted(o.host for o in ended.undone) == sorted(changed)
    assert all(o.ok and o.action.value == "rollback" for o in ended.undone)
    assert ended.on_new_setting == [] and ended.undo_errors == {}
    for name in changed:  # back on budget 8, through a verified rollback in its history
        session = await connect(load_fleet(fleet.profiles_dir)[names.index(name)])
        try:
            assert (await read_status(session)).flags["budget"] == 8
        finally:
            await session.close()
        entries = json.loads(fleet.hosts[name].local(HISTORY).read_text())["entries"]
        assert [e["action"] for e in entries[-2:]] == ["group-set", "rollback"]
        assert entries[-1]["outcome"] == "kept"
        assert [e["rollout"] for e in entries[-2:]] == ["group-test"] * 2  # one id on each
    # The findings report reads the hosts' records back as one rollout.
    package = tmp_path / "pkg"
    argv = ["snapshot", *changed, "--package", str(package), "--profiles", str(fleet.profiles_dir)]
    assert await cmd_snapshot(parse_args(argv)) == 0
    report = build_report(package)
    section = report[report.index("## Group rollouts") :]
    assert "### Rollout group-test" in section
    for name in changed:
        row = next(line for line in section.splitlines() if line.startswith(f"| {name} |"))
        assert "| budget=4 (" in row and "| kept |" in row
        assert "put back: rollout group-test: all or nothing" in row
    assert "budget=4 kept on 0 of 3 hosts; no probation rollback." in section


async def test_set_over_hosts_on_different_releases_is_refused_before_anything_changes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    timing = Timing(load_s=0.3, decode_interval_s=0.1)
    sim = SimFleet(tmp_path / "mixed", hosts=2, timing=timing, versions=("0.5.9-ddtree", "0.5.23"))
    await sim.start()
    try:
        names = list(sim.hosts)
        args = parse_args(["set", *names, "budget=4", "--yes", "--profiles", str(sim.profiles_dir)])
        assert await cli_set.cmd_set(args) == 2
        assert "different SGLang releases" in capsys.readouterr().err
        for host in sim.hosts.values():
            assert not any(c.startswith(CHANGING) for c in host.commands)
    finally:
        await asyncio.wait_for(sim.stop(), 10)


async def test_set_over_hosts_with_different_gpus_is_refused_unless_mixed(
    fleet: SimFleet, capsys: pytest.CaptureFixture[str]
) -> None:
    names = [p.name for p in load_fleet(fleet.profiles_dir)][:2]
    fleet.hosts[names[0]].gpus = ["NVIDIA H100 80GB HBM3"] * 8
    fleet.hosts[names[1]].gpus = ["NVIDIA H100 80GB HBM3"] * 4
    argv = ["set", *names, "budget=4", "--yes", "--profiles", str(fleet.profiles_dir)]
    assert await cli_set.cmd_set(parse_args(argv)) == 2
    said = capsys.readouterr().err
    assert "hosts with different GPUs" in said and "4× NVIDIA H100 80GB HBM3" in said
    for name in names:
        assert not any(c.startswith(CHANGING) for c in fleet.hosts[name].commands)
    # --mixed goes on past the refusal (a dry run: the plan, nothing changed).
    assert await cli_set.cmd_set(parse_args([*argv, "--mixed", "--dry-run"])) == 0
    assert "different GPUs" not in capsys.readouterr().err


async def test_set_over_a_group_changes_its_hosts_and_no_other(
    fleet: SimFleet, capsys: pytest.CaptureFixture[str]
) -> None:
    names = [p.name for p in load_fleet(fleet.profiles_dir)]
    pair = names[:2]
    for name in pair:
        path = fleet.profiles_dir / f"{name}.toml"
        text = path.read_text()
        first = text.index("\n") + 1  # after `name = …`, before the first table
        path.write_text(text[:first] + 'groups = ["pair"]\n' + text[first:])
    argv = ["set", "--group", "pair", "budget=4", "--yes", "--json"]
    args = parse_args([*argv, "--profiles", str(fleet.profiles_dir)])
    assert await cli_set.cmd_set(args) == 0
    summary = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert sorted(summary["applied"]) == sorted(pair) and summary["untouched"] == []
    for name in names[2:]:
        assert not any(c.startswith(CHANGING) for c in fleet.hosts[name].commands), name


async def test_rollback_over_hosts_puts_each_back_on_its_own_previous_setting(
    fleet: SimFleet, capsys: pytest.CaptureFixture[str]
) -> None:
    names = [p.name for p in load_fleet(fleet.profiles_dir)][:3]
    profiles = ["--profiles", str(fleet.profiles_dir)]
    # Refused before anything is touched: these hosts have no earlier good configuration.
    refused = parse_args(["rollback", *names, "--yes", *profiles])
    assert await cli_rollback.cmd_rollback(refused) == 1
    assert "no earlier good configuration" in capsys.readouterr().err
    assert not any(c.startswith(CHANGING) for n in names for c in fleet.hosts[n].commands)
    # Each on its own setting, then all back in one rollout (canary, then a wave).
    for name, budget in zip(names, (4, 6, 5), strict=True):
        one = parse_args(["set", name, f"budget={budget}", "--yes", *profiles])
        assert await cli_set.cmd_set(one) == 0
    capsys.readouterr()
    argv = ["rollback", *names, "--wave", "2", "--yes", "--json", *profiles]
    assert await cli_rollback.cmd_rollback(parse_args(argv)) == 0
    said = capsys.readouterr()
    summary = json.loads(said.out.splitlines()[-1])
    assert sorted(summary["applied"]) == sorted(names)
    assert f"{names[0]}: back to history entry 0" in said.err
    for name in names:
        entries = json.loads(fleet.hosts[name].local(HISTORY).read_text())["entries"]
        assert (entries[-1]["action"], entries[-1]["outcome"]) == ("rollback", "kept")
        assert entries[-1]["values"]["budget"] == 8
