"""The plan of one change to many hosts, before any host is touched: alike diffs shown once,
hosts already on it skipped, the canary then waves; different releases or GPUs refused unless
mixed; a bad value refused naming its host."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import cast

import pytest

from console.hosts.profiles import Profile
from console.service.execline import FlagError
from console.transport import remote
from console.transport.ssh import HostSession, Result
from console.tuning import group
from console.tuning.group_plan import GroupRefused, Planner, plan_group
from console.tuning.plan import Plan, make_plan

UNIT = "sglang-k26-ddtree.service"
CAT = f"""# /etc/systemd/system/{UNIT}
[Service]
ExecStart=/usr/bin/python3 -m sglang.launch_server --port 30001 --speculative-num-draft-tokens 8
"""
CAT_16 = CAT.replace("draft-tokens 8", "draft-tokens 16")
H100 = "NVIDIA H100 80GB HBM3\n"


@dataclass
class Host:
    """What plan_group asks of a host beyond its plan: nvidia-smi's GPU names."""

    name: str
    profile: Profile
    gpus: str = H100 * 8
    commands: list[str] = field(default_factory=list)

    async def run(
        self, command: remote.Command, timeout: float = 30.0, check: bool = True
    ) -> Result:
        line = " ".join(command.argv)
        self.commands.append(line)
        return Result(line, 0, self.gpus if "nvidia-smi" in line else "", "", 0.0)  # no history


def hosts(*found: Host) -> dict[str, HostSession]:
    """The fake hosts, typed as the sessions plan_group takes (it asks only `run`)."""
    return {h.name: cast(HostSession, h) for h in found}


def planner(plans: Mapping[str, Plan | None]) -> Planner:
    async def plan(session: HostSession) -> Plan:
        found = plans[session.name]
        if found is None:
            raise FlagError("budget: must be between 1 and 1024, got 0")
        return found

    return plan


def plan_on(profile: Profile, host: str, cat: str = CAT, release: str | None = "0.5.23") -> Plan:
    return replace(make_plan(profile, cat, {"budget": 16}), host=host, release=release)


async def test_alike_hosts_share_one_diff_and_a_host_on_it_already_is_skipped(
    profile: Profile,
) -> None:
    names = ["b300-1", "b300-2", "b300-3", "b300-4", "b300-5", "b300-6"]
    plans = {n: plan_on(profile, n) for n in names}
    plans["b300-4"] = plan_on(profile, "b300-4", CAT_16)  # on budget 16 already
    sessions = hosts(*(Host(n, profile) for n in names))
    planned = await plan_group(sessions, names, planner(plans), wave=group.wave_size("50%"))
    assert [p.host for p in planned.skipped] == ["b300-4"]
    assert [[p.host for p in w] for w in planned.waves] == [
        ["b300-1"],
        ["b300-2", "b300-3"],
        ["b300-5", "b300-6"],
    ]
    assert planned.wave_lines()[:2] == ["canary 1: b300-1", "wave 2: b300-2, b300-3"]
    assert planned.diff.count("# b300-1, b300-2, b300-3, b300-5, b300-6\n") == 1
    assert planned.diff.count("+    --speculative-num-draft-tokens 16") == 1
    assert "(b300-4 already on it)" in planned.summary()
    # No past change to go by: a host takes its soak (60 s) and a minute; three waves.
    assert planned.estimated_s == 3 * 120 and "about 6 min" in planned.summary()
    assert planned.old_values["budget"] == 8


async def test_hosts_on_different_releases_are_refused_unless_mixed(profile: Profile) -> None:
    plans = {"a": plan_on(profile, "a"), "b": plan_on(profile, "b", release="0.5.9-ddtree")}
    sessions = hosts(*(Host(n, profile) for n in plans))
    with pytest.raises(
        GroupRefused, match=r"different SGLang releases \(a 0.5.23, b 0.5.9-ddtree\)"
    ):
        await plan_group(sessions, ["a", "b"], planner(plans))
    planned = await plan_group(sessions, ["a", "b"], planner(plans), mixed=True)
    assert len(planned.todo) == 2


async def test_hosts_with_different_gpus_are_refused_unless_mixed(profile: Profile) -> None:
    plans = {"a": plan_on(profile, "a"), "b": plan_on(profile, "b")}
    sessions = hosts(Host("a", profile), Host("b", profile, gpus=H100 * 4))
    with pytest.raises(GroupRefused, match=r"different GPUs .*4× NVIDIA H100"):
        await plan_group(sessions, ["a", "b"], planner(plans))
    assert (await plan_group(sessions, ["a", "b"], planner(plans), mixed=True)).changed


async def test_a_bad_value_on_one_host_refuses_the_rollout_naming_it(profile: Profile) -> None:
    plans: dict[str, Plan | None] = {"a": plan_on(profile, "a"), "b": None}
    sessions = hosts(*(Host(n, profile) for n in plans))
    with pytest.raises(FlagError, match=r"^b: budget: must be between"):
        await plan_group(sessions, ["a", "b"], planner(plans))
    assert all("nvidia-smi" not in c for h in sessions.values() for c in cast(Host, h).commands)
