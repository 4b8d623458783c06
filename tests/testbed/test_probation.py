"""Probation against real systemd: a crash after a kept change is rolled back by `specops watch`.

The testbed server follows the real timeline (a drop-in sets its `SPECOPS_SIM_*` knobs):
`max_running=256` under 200 requests survives a 2 s soak, is kept, and dies in cuBLAS 20 s
after ready; systemd restarts it (Restart=on-failure) into the same crash. `specops watch`,
started after the change was kept, knows the probation from the host's history file and goes
back to the previous configuration through the full rollout.
"""

from __future__ import annotations

import asyncio

import pytest

from tests.integration.test_watch import Watching
from tests.testbed.bed import Testbed
from tests.testbed.layout import UNIT
from tests.testbed.test_rollout import effective, running_argv
from tests.testbed.test_soak import apply_a_good_setting, host_history, specops_set, with_timeline

pytestmark = pytest.mark.testbed


@pytest.mark.timeout(300)
async def test_watch_rolls_back_a_crash_on_probation(bed: Testbed) -> None:
    host = bed.hosts[0]
    with_timeline(host)
    await apply_a_good_setting(bed, host)
    previous = effective(host)
    code, output = await asyncio.to_thread(
        specops_set, bed, host, "max_running=256", "--soak", "2", timeout=120
    )
    assert code == 0, output
    watch = Watching(bed.profiles_dir, host.name, "--countdown", "1")
    try:
        await asyncio.to_thread(watch.wait_for, f"{host.name}: probation 30m left")
        crash = await asyncio.to_thread(watch.wait_for, "after a kept change (probation", 60)
        assert "cublas" in crash
        done = await asyncio.to_thread(watch.wait_for, "probation rollback:", 120)
        assert "back on history entry" in done, watch.output()
        assert await asyncio.to_thread(watch.interrupt) == 0, watch.output()
    finally:
        watch.stop()
    assert effective(host).argv == previous.argv
    assert running_argv(host) == tuple(previous.argv)
    host.wait_healthy()
    rollback, failed, kept = host_history(host)[:3]
    assert (failed["outcome"], failed["stage"], failed["signature"]) == (
        "rolled_back",
        "probation",
        "cublas",
    )
    assert 15 <= failed["kept_to_crash_s"] <= 40
    assert (rollback["kind"], rollback["outcome"]) == ("rollback", "kept")
    assert rollback["values"] == kept["values"]  # back on the good setting before
    unit_log = host.run("journalctl", "-u", UNIT, "-o", "cat", "--no-pager").stdout
    assert "CUBLAS_STATUS_EXECUTION_FAILED" in unit_log
