"""Planning a change without a host: parse NAME=VALUE, diff, drop-in, the build's arguments."""

from __future__ import annotations

from pathlib import Path

import pytest

from console.hosts.profiles import Profile, parse_profile
from console.service.execline import FlagError
from console.service.unit import effective_service
from console.sim.host import unit_file
from console.sim.sglang import help_text
from console.tuning.plan import arguments_to_check, known_arguments, make_plan, parse_assignments

UNIT = "sglang-k26-ddtree.service"
CAT = f"# /etc/systemd/system/{UNIT}\n" + unit_file(UNIT, "/opt/venv/bin/python3", 30001)


@pytest.fixture
def profile() -> Profile:
    return parse_profile(
        {
            "name": "b300",
            "ssh": {"host": "b300"},
            "service": {"unit": UNIT},
            "flags": {
                "budget": {"arg": "--speculative-num-draft-tokens", "type": "int", "min": 1},
                "topk": {"env": "SGLANG_DDTREE_MAX_TOPK", "type": "int"},
                "cuda_graph": {"arg": "--disable-cuda-graph", "type": "switch", "inverted": True},
                "nvls": {"arg": "--enable-nccl-nvls", "type": "switch"},
            },
        },
        Path("b300.toml"),
    )


def test_plan_shows_only_what_changes_and_renders_a_dropin_systemd_reads_back(
    profile: Profile,
) -> None:
    plan = make_plan(profile, CAT, parse_assignments(profile, ["budget=16", "cuda_graph=off"]))
    assert plan.old_values == {"budget": 8, "topk": 4, "cuda_graph": True, "nvls": False}
    assert plan.new_values == {"budget": 16, "topk": 4, "cuda_graph": False, "nvls": False}
    assert plan.summary() == "budget 8 → 16, cuda_graph on → off"
    changed = [
        line for line in plan.diff.splitlines() if line[:1] in "+-" and line[1:2] != line[:1]
    ]
    assert changed == [
        "-    --speculative-num-draft-tokens 8",
        "+    --speculative-num-draft-tokens 16",
        "+    --disable-cuda-graph",
    ]
    assert "PYTHONUNBUFFERED" not in plan.diff  # only the profile's variables are shown
    assert plan.dropin_path == f"/etc/systemd/system/{UNIT}.d/zz-specops.conf"
    assert plan.dropin is not None
    merged = effective_service(CAT + f"\n# {plan.dropin_path}\n" + plan.dropin)
    assert tuple(merged.argv) == plan.new_argv
    assert merged.environment["SGLANG_DDTREE_MAX_TOPK"] == "4"
    assert merged.environment["PYTHONUNBUFFERED"] == "1"  # the unit's own variables survive


def test_setting_the_current_values_is_no_change(profile: Profile) -> None:
    plan = make_plan(profile, CAT, {"budget": 8, "cuda_graph": True})
    assert not plan.changed and plan.diff == "" and plan.summary() == "no change"


def test_arguments_checked_are_the_changed_ones_on_the_new_command_line(
    profile: Profile,
) -> None:
    plan = make_plan(profile, CAT, {"budget": 16, "nvls": True, "cuda_graph": True, "topk": 2})
    # cuda_graph on means --disable-cuda-graph is absent; topk is an environment variable.
    assert arguments_to_check(profile, plan) == [
        "--speculative-num-draft-tokens",
        "--enable-nccl-nvls",
    ]


def test_known_arguments_come_from_argparse_help() -> None:
    known = known_arguments(help_text())
    assert {"--speculative-num-draft-tokens", "--disable-cuda-graph", "--tp-size", "-h"} <= known
    assert "--speculative-ddtree-budget" not in known
    assert "--model" in known and "--model-path" in known  # aliases count


def test_assignments_are_validated_with_names_and_values(profile: Profile) -> None:
    with pytest.raises(FlagError, match="given more than once"):
        parse_assignments(profile, ["budget=8", "budget=16"])
    with pytest.raises(FlagError, match="nothing to set"):
        parse_assignments(profile, [])
    with pytest.raises(FlagError, match="a switch is on/off"):
        parse_assignments(profile, ["cuda_graph=maybe"])
    with pytest.raises(FlagError, match=r"known: budget, cuda_graph, nvls, topk"):
        parse_assignments(profile, ["bugdet=8"])
