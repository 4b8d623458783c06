"""A console killed in the middle of a group rollout leaves every host in a recorded state that
the next `specops status` names: the canary on the new setting, the host that was changing
"left on" what runs with the rollout's id, the host after it untouched."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from console.cli import main
from console.hosts.profiles import load_fleet
from console.sim.fleet import SimFleet, ThreadedSimFleet
from console.sim.sglang import Timing
from tests import pace

HISTORY = "/var/lib/specops/sglang-k26-ddtree.service/history.json"


@pytest.fixture
def sim(tmp_path: Path) -> Iterator[ThreadedSimFleet]:
    timing = Timing(load_s=0.3, decode_interval_s=0.1)
    fleet = ThreadedSimFleet(SimFleet(tmp_path / "sim", hosts=3, timing=timing, soak_s=3.0))
    fleet.start()
    yield fleet
    fleet.stop()


def killed_when(argv: list[str], said: str) -> str:
    """Run `specops ARGV`, SIGKILL it once its stderr says `said`; what it said until then."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "console", *argv],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ),
    )
    lines: queue.Queue[str] = queue.Queue()

    def read() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.put(line)

    threading.Thread(target=read, daemon=True).start()
    seen: list[str] = []
    deadline = pace.deadline(90)
    try:
        while not any(said in line for line in seen):
            assert time.monotonic() < deadline, "".join(seen)
            try:
                seen.append(lines.get(timeout=0.5))
            except queue.Empty:
                assert proc.poll() is None, "".join(seen)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    return "".join(seen)


def test_a_console_killed_mid_rollout_leaves_states_status_names(
    sim: ThreadedSimFleet, capsys: pytest.CaptureFixture[str]
) -> None:
    profiles = str(sim.fleet.profiles_dir)
    canary, changing, after = [p.name for p in load_fleet(sim.fleet.profiles_dir)]
    argv = ["set", canary, changing, after, "budget=4", "--yes", "--wave", "1"]
    said = killed_when([*argv, "--profiles", profiles], f"{changing}: ✓ restart")
    assert f"wave 2: {changing}" in said and "wave 3" not in said

    assert main(["status", canary, changing, after, "--json", "--profiles", profiles]) == 0
    records = {r["host"]: r for r in map(json.loads, capsys.readouterr().out.splitlines())}
    assert records[canary]["flags"]["budget"] == 4 and "left_on" not in records[canary]
    left = records[changing]["left_on"]
    assert left["action"] == "group-set" and left["outcome"] == "started"
    rollout = left["rollout"]
    assert rollout and rollout.startswith("group-")
    assert f"of rollout {rollout}" in left["note"] and "never finished" in left["note"]
    assert records[after]["flags"]["budget"] == 8 and "left_on" not in records[after]
    untouched = sim.fleet.hosts[after].local(HISTORY)
    assert not untouched.exists() or "group-set" not in untouched.read_text()
    # The canary's kept entry carries the same rollout: one experiment across the hosts.
    kept = json.loads(sim.fleet.hosts[canary].local(HISTORY).read_text())["entries"][-1]
    assert kept["rollout"] == rollout and kept["outcome"] == "kept"

    # The text form says it too, naming the rollout.
    assert main(["status", changing, "--profiles", profiles]) == 0
    assert f"of rollout {rollout}" in capsys.readouterr().out.replace("\n", " ")
