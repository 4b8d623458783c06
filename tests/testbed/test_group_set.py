"""`specops set` over both testbed hosts (real systemd, journald, OpenSSH): a canary that
crashes stops the rollout with the other host untouched; a good change reaches both."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.testbed.bed import Testbed
from tests.testbed.test_rollout import dropin_dir, effective, flags_of, running_argv

pytestmark = pytest.mark.testbed


def specops_set(bed: Testbed, *argv: str) -> tuple[int, str]:
    command = [sys.executable, "-m", "console", "set", *argv, "--soak", "5", "--yes"]
    proc = subprocess.run(
        [*command, "--profiles", str(bed.profiles_dir)], capture_output=True, text=True, timeout=240
    )
    return proc.returncode, proc.stdout + proc.stderr


@pytest.mark.timeout(300)
def test_a_crashing_canary_stops_the_rollout_and_a_good_change_reaches_every_host(
    bed: Testbed,
) -> None:
    canary, second = bed.hosts[:2]
    before = {h.name: effective(h) for h in (canary, second)}

    code, said = specops_set(bed, canary.name, second.name, "budget=16")
    assert code == 1, said
    assert f"never touched: {second.name}" in said
    assert effective(canary).argv == before[canary.name].argv  # rolled back, verified
    assert running_argv(canary) == tuple(before[canary.name].argv)
    assert not dropin_dir(second).exists()  # the second host: not a file written
    assert effective(second).argv == before[second.name].argv

    code, said = specops_set(bed, canary.name, second.name, "budget=4")
    assert code == 0, said
    for host in (canary, second):
        assert flags_of(bed, host, effective(host))["budget"] == 4
        assert running_argv(host) == tuple(effective(host).argv)
