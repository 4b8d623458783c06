"""`specops sweep` on a real host (systemd, journald, OpenSSH): each cell a real restart, the
crashing cell rolled back, a console SIGKILLed mid-campaign resumed by the next, and the host
back on its starting ExecStart. (One test, to keep the suite's serial host time down.)"""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
import time

import pytest

from tests import pace
from tests.testbed.bed import Testbed
from tests.testbed.hosts import Host
from tests.testbed.layout import UNIT
from tests.testbed.test_rollout import effective, running_argv
from tests.testbed.test_soak import host_history

pytestmark = pytest.mark.testbed


@pytest.mark.timeout(400)
def test_a_console_killed_in_the_third_cell_is_resumed_and_ends_the_same_way(
    bed: Testbed,
) -> None:
    host = bed.hosts[0]
    before = effective(host)
    campaigns = host.directory / "var-lib-specops" / UNIT / "campaigns"
    base = [sys.executable, "-m", "console", "sweep", host.name, "--yes", "--json"]
    profiles = ["--profiles", str(bed.profiles_dir)]
    grid = ["budget=4,6,12", "--soak", "3", "--measure", "3"]
    console = subprocess.Popen([*base, *grid, *profiles], stdout=subprocess.PIPE, text=True)
    try:
        deadline = pace.deadline(240)
        record: dict[str, object] = {}
        # Killed mid-change: the third cell begun in the campaign, its change started on the
        # host and its flags in place (a slow console can be killed between these steps).
        while time.monotonic() < deadline and not (
            record.get("current") == 2 and changing(host) and budget_of(host) == "12"
        ):
            found = list(campaigns.glob("*.json"))
            if found:
                with contextlib.suppress(ValueError):  # caught mid-rename: look again
                    record = json.loads(found[0].read_text())
            time.sleep(0.1)
        assert record.get("current") == 2 and budget_of(host) == "12", record
    finally:
        console.send_signal(signal.SIGKILL)
        console.wait(30)
    campaign = str(record["id"])
    proc = subprocess.run(
        [*base, "--resume", campaign, *profiles], capture_output=True, text=True, timeout=240
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    resumed = json.loads(proc.stdout.splitlines()[-1])
    assert resumed["campaign"] == campaign and resumed["state"] == "finished"
    assert [c["outcome"] for c in resumed["cells"]] == ["measured", "measured", "crashed"]
    assert resumed["cells"][2]["signature"] == "illegal_memory_access"
    assert all(c["tok_s"] for c in resumed["cells"][:2])  # measured over their own runs
    path = campaigns / f"{campaign}.json"
    assert json.loads(path.read_text())["state"] == "finished"
    assert effective(host).argv == before.argv  # back on the configuration it started on
    assert running_argv(host) == tuple(before.argv)
    history = list(reversed(host_history(host)))
    assert any(e["outcome"] == "abandoned" for e in history)  # the killed cell's change
    # Its flags were never verified: the host went back to the start before running it again.
    killed = next(i for i, e in enumerate(history) if e["outcome"] == "abandoned")
    assert [e["action"] for e in history[killed + 1 :]] == ["sweep-end", "sweep-cell"]
    assert history[-1]["outcome"] == "rolled_back"  # budget 12 with graphs crashed again


def changing(host: Host) -> bool:
    """Whether the host's newest history entry is a change still under way ("started")."""
    with contextlib.suppress(FileNotFoundError, ValueError):  # not yet written, mid-rename
        entries = host_history(host)
        return bool(entries) and entries[0]["outcome"] == "started"
    return False


def budget_of(host: Host) -> str | None:
    """The budget (`--speculative-num-draft-tokens`) in the unit's effective ExecStart."""
    argv = list(effective(host).argv)
    flag = "--speculative-num-draft-tokens"
    return argv[argv.index(flag) + 1] if flag in argv else None
