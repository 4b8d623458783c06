"""After a console killed mid-change on real systemd, the next `specops status` says which
configuration the host is left on (issue 20, item 7): the host's history says the change
never finished, the main process's /proc cmdline says what really runs, and the entry what
the killed change meant to set."""

from __future__ import annotations

import asyncio
import json
import signal

import pytest

from tests.testbed.bed import Testbed
from tests.testbed.layout import UNIT
from tests.testbed.test_rollout import DROPIN, GOOD, dropin_dir, running_argv, specops
from tests.testbed.watch import kill_on_file

pytestmark = pytest.mark.testbed


@pytest.mark.timeout(240)
async def test_status_after_a_console_killed_mid_change_says_what_runs(bed: Testbed) -> None:
    host = bed.hosts[0]
    argv = running_argv(host)
    directory = dropin_dir(host)
    directory.mkdir(exist_ok=True)  # to watch it; the console's `mkdir -p` then finds it
    proc = specops(bed, "set", host.name, *GOOD, "--yes")
    killed = await asyncio.to_thread(kill_on_file, proc.pid, directory, DROPIN, 120)
    output = proc.communicate()[0]
    assert killed is not None, f"the console finished before the drop-in was written:\n{output}"
    assert proc.returncode == -signal.SIGKILL
    assert running_argv(host) == argv  # killed before the restart: the old server runs

    text = specops(bed, "status", host.name).communicate(timeout=120)[0]
    said = " ".join(text.split())
    assert f"{host.name} left on: budget=8 " in said, text
    assert "(set #1 by " in said and "never finished" in said
    assert "it set budget=16 cuda_graph=off)" in said

    text = specops(bed, "status", host.name, "--json").communicate(timeout=120)[0]
    (record,) = [json.loads(line) for line in text.splitlines() if line.startswith("{")]
    left = record["left_on"]
    assert left["source"] == "running command" and left["flags"]["budget"] == 8
    assert (left["entry"], left["outcome"]) == (1, "started")
    assert record["flags"]["budget"] == 8  # systemd has not seen the new drop-in directory
    assert record["unit"] == UNIT


@pytest.mark.timeout(120)
async def test_a_host_as_its_files_say_has_no_left_on_line(bed: Testbed) -> None:
    """On real systemd the main process's /proc cmdline reads as the unit's ExecStart: no
    false alarm on a host nobody interrupted."""
    for host in bed.hosts:
        text = specops(bed, "status", host.name, "--json").communicate(timeout=120)[0]
        (record,) = [json.loads(line) for line in text.splitlines() if line.startswith("{")]
        assert record["connected"] and "left_on" not in record, record
