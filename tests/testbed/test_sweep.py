"""`specops sweep` on a real host (systemd, journald, OpenSSH): each cell a real restart, the
crashing cell rolled back by systemd's own account, the host back on its starting ExecStart."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.testbed.bed import Testbed
from tests.testbed.layout import UNIT
from tests.testbed.test_rollout import effective, running_argv
from tests.testbed.test_soak import host_history

pytestmark = pytest.mark.testbed


def test_a_campaign_measures_each_cell_records_the_crash_and_ends_where_it_began(
    bed: Testbed,
) -> None:
    host = bed.hosts[0]
    before = effective(host)
    command = [sys.executable, "-m", "console", "sweep", host.name, "budget=4,16"]
    command += ["cuda_graph=on,off", "--soak", "2", "--measure", "3", "--yes", "--json"]
    proc = subprocess.run(
        [*command, "--profiles", str(bed.profiles_dir)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    record = json.loads(proc.stdout.splitlines()[-1])
    cells = [
        (c["flags"]["budget"], c["flags"]["cuda_graph"], c["outcome"]) for c in record["cells"]
    ]
    assert cells == [
        (4, True, "measured"),
        (4, False, "measured"),
        (16, True, "crashed"),
        (16, False, "measured"),
    ]
    assert record["cells"][2]["signature"] == "illegal_memory_access"
    assert all(c["tok_s"] for c in record["cells"] if c["outcome"] == "measured")
    # The host, asked directly: the unit's own ExecStart again, and the process runs it.
    assert effective(host).argv == before.argv
    assert running_argv(host) == tuple(before.argv)
    actions = [e.get("action") for e in reversed(host_history(host))][1:]
    assert actions == ["sweep-cell"] * 4 + ["sweep-end"]
    path = host.directory / "var-lib-specops" / UNIT / "campaigns" / f"{record['campaign']}.json"
    assert json.loads(path.read_text())["state"] == "finished"
