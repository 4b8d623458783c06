"""The soak window against real systemd: crashes after ready end rolled back, good changes last.

The finding: on a real host `specops set HOST budget=16` exited 0 ("healthy, accept len 6.04")
and saved budget 16 as last good; 1.5 s later the server died in `cuda_graph_runner.replay`,
then `status=9/KILL` and systemd's Restart=on-failure loop. Here the testbed server follows that
timeline (a drop-in sets its `SPECOPS_SIM_*` knobs), and each run is the real CLI, so what is
checked is its exit status and what systemd says afterwards.
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
import time
from typing import Any

import pytest

from tests.testbed.bed import Testbed
from tests.testbed.hosts import Host
from tests.testbed.layout import UNIT
from tests.testbed.test_rollout import dropin_dir, effective, running_argv

pytestmark = pytest.mark.testbed

TIMELINE = """\
[Service]
Environment=SPECOPS_SIM_GRAPH_CRASH=batches
Environment=SPECOPS_SIM_REQUESTS=200
Environment=SPECOPS_SIM_CUBLAS_AFTER_S={cublas_after_s:g}
"""
"""Budget > 8 with graphs dies 2–6 decode batches after ready; > 128 running dies in cuBLAS
`cublas_after_s` after ready (the testbed logs a decode batch every 0.5 s)."""

SOAK_CUBLAS_AFTER_S = 8.0
"""Here cuBLAS strikes 8 s after ready, inside a 13 s soak: late enough that the smoke test
and the first decode lines pass, as on the B300, and short enough for the suite."""


def with_timeline(host: Host, cublas_after_s: float = 20.0) -> None:
    directory = dropin_dir(host)
    directory.mkdir(exist_ok=True)
    (directory / "10-timeline.conf").write_text(TIMELINE.format(cublas_after_s=cublas_after_s))
    host.run("systemctl", "daemon-reload")


def specops_set(bed: Testbed, host: Host, *args: str, timeout: float) -> tuple[int, str]:
    command = [sys.executable, "-m", "console", "set", host.name, *args, "--yes"]
    proc = subprocess.run(
        [*command, "--profiles", str(bed.profiles_dir)],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return proc.returncode, proc.stdout + proc.stderr


def host_history(host: Host) -> list[dict[str, Any]]:
    """The host's history file, newest first, read on the host's side (not through specops)."""
    path = host.directory / "var-lib-specops" / UNIT / "history.json"
    entries: list[dict[str, Any]] = json.loads(path.read_text())["entries"]
    return entries[::-1]


def last_good(host: Host) -> dict[str, Any] | None:
    """The host's last good configuration: the newest kept (or original) entry of its history."""
    return next((e for e in host_history(host) if e["outcome"] in ("kept", "original")), None)


def invocation(host: Host) -> dict[str, str]:
    return host.show(UNIT, "InvocationID", "NRestarts", "ActiveState")


async def apply_a_good_setting(bed: Testbed, host: Host) -> None:
    code, output = await asyncio.to_thread(
        specops_set, bed, host, "window=2048", "--soak", "2", timeout=120
    )
    assert code == 0, output


@pytest.mark.timeout(300)
@pytest.mark.parametrize(
    ("assignment", "signature", "after", "soak"),
    [
        ("budget=16", "illegal memory access", (0.5, 4.0), "6"),  # 2–6 batches of 0.5 s
        ("max_running=256", "CUBLAS_STATUS_EXECUTION_FAILED", (7.0, 12.0), "13"),
    ],
)
async def test_a_crash_after_ready_exits_1_back_on_the_previous_setting(
    bed: Testbed, assignment: str, signature: str, after: tuple[float, float], soak: str
) -> None:
    host = bed.hosts[0]
    with_timeline(host, SOAK_CUBLAS_AFTER_S)
    await apply_a_good_setting(bed, host)
    previous = effective(host)
    good = last_good(host)
    assert good is not None

    code, output = await asyncio.to_thread(
        specops_set, bed, host, assignment, "--soak", soak, timeout=240
    )
    assert code == 1, output
    assert "rolled back" in output and signature in output
    found = re.search(r"\[soak, ([\d.]+)s after ready\]", output)
    assert found, output
    assert after[0] <= float(found.group(1)) <= after[1], output

    # systemd's record: SIGKILL of the crashed server, then back on the previous command.
    unit_log = host.run("journalctl", "-u", UNIT, "-o", "cat", "--no-pager").stdout
    assert "Main process exited, code=killed, status=9/KILL" in unit_log
    after_rollback = effective(host)
    assert after_rollback.argv == previous.argv
    assert running_argv(host) == tuple(previous.argv)
    host.wait_healthy()
    assert last_good(host) == good
    # The host's own history: the crash rolled back with its stage, the good setting still last.
    newest, kept = host_history(host)[:2]
    assert (newest["outcome"], newest["stage"]) == ("rolled_back", "soak")
    assert (kept["outcome"], kept["values"]["window"]) == ("kept", 2048)


@pytest.mark.timeout(300)
async def test_a_good_change_exits_0_and_is_the_same_invocation_long_after(
    bed: Testbed,
) -> None:
    host = bed.hosts[0]
    with_timeline(host, SOAK_CUBLAS_AFTER_S)  # the same timeline: max running 32 never crashes
    started = time.monotonic()
    code, output = await asyncio.to_thread(
        specops_set, bed, host, "budget=16", "cuda_graph=false", "--soak", "10", timeout=240
    )
    assert code == 0, output
    assert "stayed up 10s" in output
    kept = invocation(host)
    good = last_good(host)
    assert good is not None and good["invocation_id"] == kept["InvocationID"]
    # Still the same invocation at twice the moment the crashing settings die.
    await asyncio.sleep(max(0.0, 2 * SOAK_CUBLAS_AFTER_S + 2 - (time.monotonic() - started)))
    assert invocation(host) == {**kept, "ActiveState": "active", "NRestarts": "0"}
    host.wait_healthy()
