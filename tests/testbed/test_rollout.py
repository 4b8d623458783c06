"""Flag changes against real systemd: applied, rolled back, and a console killed mid-change.

What counts is what the host says afterwards, asked directly (not over the console's own
connection): `systemctl cat` for the effective unit, `systemctl show` for the invocation,
/proc for the argv systemd really started, the drop-in directory for stray files.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from console.hosts.events import RolloutFinished, RolloutOutcome
from console.service.flags import read_flags
from console.service.unit import ServiceExec, effective_service
from console.transport.ssh import HostSession
from console.tuning.plan import check_arguments, parse_assignments, read_plan
from console.tuning.rollout import Rollout, RolloutOptions
from tests import pace
from tests.testbed.bed import Testbed
from tests.testbed.helpers import connected
from tests.testbed.hosts import Host
from tests.testbed.layout import UNIT
from tests.testbed.watch import kill_on_file

pytestmark = pytest.mark.testbed

QUICK = RolloutOptions(poll_s=0.2, settle_s=5.0)
DROPIN = "zz-specops.conf"
GOOD = ("budget=16", "cuda_graph=false")


async def change(session: HostSession, *assignments: str) -> RolloutFinished:
    plan = await read_plan(session, parse_assignments(session.profile, list(assignments)))
    await check_arguments(session, plan)  # `/usr/bin/python3 -m sglang.launch_server --help`
    return await Rollout(session, plan, options=QUICK).run()


def effective(host: Host) -> ServiceExec:
    return effective_service(host.run("systemctl", "cat", UNIT).stdout)


def running_argv(host: Host) -> tuple[str, ...]:
    """The argv of the process systemd started for the unit (from /proc, not from systemd)."""
    main = int(host.show(UNIT, "MainPID")["MainPID"])
    return next(p.argv for p in host.processes() if p.ns_pid == main)


def dropin_dir(host: Host) -> Path:
    return host.directory / "etc-systemd" / "system" / f"{UNIT}.d"


def flags_of(bed: Testbed, host: Host, service: ServiceExec) -> dict[str, object]:
    profile = bed.profile(host.name)
    return dict(read_flags(profile.flags, service.argv, service.environment))


async def test_a_good_change_ends_healthy_on_the_new_execstart(bed: Testbed) -> None:
    host = bed.hosts[0]
    before = effective(host)
    session = await connected(bed.profile(host.name))
    try:
        result = await change(session, *GOOD)
    finally:
        await session.close()
    assert result.outcome is RolloutOutcome.APPLIED, result.reason

    after = effective(host)
    assert flags_of(bed, host, after) == {
        **flags_of(bed, host, before),
        "budget": 16,
        "cuda_graph": False,
    }
    assert after.argv != before.argv
    assert running_argv(host) == tuple(after.argv)  # systemd really runs the new command
    state = host.show(UNIT, "ActiveState", "SubState", "InvocationID", "NeedDaemonReload")
    assert state == {
        "ActiveState": "active",
        "SubState": "running",
        "InvocationID": result.invocation_id,
        "NeedDaemonReload": "no",
    }
    assert sorted(os.listdir(dropin_dir(host))) == [DROPIN]  # no temp file left behind
    # Root's alone (it may hold secret flags' values), written by the real install and tee.
    assert (dropin_dir(host) / DROPIN).stat().st_mode & 0o777 == 0o600
    assert host.http("/health")[0] == 200


async def test_budget_16_with_cuda_graphs_crashes_and_is_rolled_back(bed: Testbed) -> None:
    host = bed.hosts[0]
    before = effective(host)
    session = await connected(bed.profile(host.name))
    try:
        result = await change(session, "budget=16")
    finally:
        await session.close()
    assert result.outcome is RolloutOutcome.ROLLED_BACK, result.reason
    assert result.signature == "illegal_memory_access"

    # systemd's own record of the failed run: SGLang's traceback, then SIGKILL.
    failed = result.failed_invocation
    assert failed
    lines = host.run("journalctl", "-o", "cat", "--no-pager", f"_SYSTEMD_INVOCATION_ID={failed}")
    assert "an illegal memory access was encountered" in lines.stdout
    unit_log = host.run("journalctl", "-u", UNIT, "-o", "cat", "--no-pager").stdout
    assert "Main process exited, code=killed, status=9/KILL" in unit_log

    # Back where it was, and healthy.
    after = effective(host)
    assert after.argv == before.argv and after.environment == before.environment
    assert not (dropin_dir(host) / DROPIN).exists()
    assert running_argv(host) == tuple(before.argv)
    state = host.show(UNIT, "ActiveState", "InvocationID", "NeedDaemonReload")
    assert state == {
        "ActiveState": "active",
        "InvocationID": result.invocation_id,
        "NeedDaemonReload": "no",
    }
    host.wait_healthy()


# --- a console killed in the middle of a change --------------------------------------------


def specops(bed: Testbed, *args: str) -> subprocess.Popen[str]:
    """The real console, as its own process (so it can be SIGKILLed)."""
    return subprocess.Popen(
        [sys.executable, "-m", "console", *args, "--profiles", str(bed.profiles_dir)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def kill_at_restart(host: Host, pid: int, timeout: float) -> bool:
    old = host.show(UNIT, "InvocationID")["InvocationID"]
    deadline = pace.deadline(timeout)
    while time.monotonic() < deadline:
        if host.show(UNIT, "InvocationID")["InvocationID"] != old:
            os.kill(pid, signal.SIGKILL)
            return True
        time.sleep(0.01)
    return False


@pytest.mark.timeout(300)
@pytest.mark.parametrize("moment", ["temp-file-created", "renamed", "restarting"])
async def test_a_console_killed_mid_change_never_leaves_a_half_written_dropin(
    bed: Testbed, moment: str
) -> None:
    host = bed.hosts[0]
    original = effective(host)
    invocation = host.show(UNIT, "InvocationID")["InvocationID"]
    session = await connected(bed.profile(host.name))
    try:
        plan = await read_plan(session, parse_assignments(session.profile, list(GOOD)))
    finally:
        await session.close()
    directory = dropin_dir(host)
    directory.mkdir(exist_ok=True)  # to watch it; the console's `mkdir -p` then finds it

    proc = specops(bed, "set", host.name, *GOOD, "--yes")
    if moment == "restarting":
        killed = await asyncio.to_thread(kill_at_restart, host, proc.pid, 120)
    else:
        suffix = ".tmp" if moment == "temp-file-created" else DROPIN
        killed = await asyncio.to_thread(kill_on_file, proc.pid, directory, suffix, 120) is not None
    output = proc.communicate()[0]
    assert killed, f"the console finished before the moment came:\n{output}"
    assert proc.returncode == -signal.SIGKILL

    # The drop-in is absent or complete, never partial; systemd runs one of two commands.
    conf = directory / DROPIN
    if moment == "temp-file-created":
        assert not conf.exists()
    else:
        assert conf.read_text() == plan.dropin
    if moment == "restarting":
        assert effective(host).argv == list(plan.new_argv)
    else:  # killed before daemon-reload: systemd still has (and runs) the unit as it was
        assert effective(host).argv == original.argv
        assert host.show(UNIT, "InvocationID")["InvocationID"] == invocation
        # (NeedDaemonReload may even say "no" here: systemd caches which drop-in
        # directories exist, and this one is new since the last reload.)

    # Running the same change again ends healthy on it, whatever the kill left.
    rerun = specops(bed, "set", host.name, *GOOD, "--yes")
    output = rerun.communicate(timeout=180)[0]
    assert rerun.returncode == 0, output
    # ... and says the killed one was abandoned; the host's own history says so too.
    assert "history entry 1 (set by " in output and "was abandoned half way" in output
    record = json.loads((host.directory / "var-lib-specops" / UNIT / "history.json").read_text())
    # (Killed while restarting, the new setting was already in place: nothing left to change,
    # and never soaked, so it is not a kept entry.)
    rerun_entry = [] if moment == "restarting" else [(2, "kept")]
    assert [(e["n"], e["outcome"]) for e in record["entries"]] == [
        (0, "original"),
        (1, "abandoned"),
        *rerun_entry,
    ]
    assert effective(host).argv == list(plan.new_argv)
    assert running_argv(host) == tuple(plan.new_argv)
    assert host.show(UNIT, "NeedDaemonReload")["NeedDaemonReload"] == "no"
    assert sorted(os.listdir(directory)) == [DROPIN]
    host.wait_healthy()
