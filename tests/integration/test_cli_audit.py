"""`specops audit`: an entry per action (intent, drop-in, outcome), polls hidden unless
asked, and quiet when its reader goes away (`| head`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from console.cli import main
from console.local.audit import AuditLog, AuditRecord
from console.sim.fleet import SimFleet, ThreadedSimFleet
from console.sim.sglang import Timing

REPO = Path(__file__).resolve().parents[2]


def test_a_change_leaves_its_intent_dropin_and_outcome_and_polls_stay_out_of_the_way(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sim = ThreadedSimFleet(
        SimFleet(tmp_path / "sim", hosts=1, timing=Timing(load_s=0.3, decode_interval_s=0.1))
    )
    sim.start()
    try:
        profiles = str(sim.fleet.profiles_dir)
        assert main(["status", "--profiles", profiles]) == 0
        assert main(["set", "b300", "budget=16", "--yes", "--profiles", profiles]) == 1
        capsys.readouterr()
        assert main(["audit", "--json"]) == 0
        entries = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
        (action,) = [e for e in entries if e.get("kind") == "action"]
        assert action["host"] == "b300" and action["action"] == "set"
        assert action["intent"] == "budget 8 → 16"
        assert "--speculative-num-draft-tokens 16" in action["dropin"]
        assert action["outcome"].startswith("rolled back: crash: illegal_memory_access")
        commands = [e["command"] for e in entries if "command" in e]
        assert not any(c.startswith("systemctl show") for c in commands)
        assert any(c.startswith("systemctl restart") for c in commands)
        assert main(["audit", "--json", "--all"]) == 0
        everything = capsys.readouterr().out
        assert "systemctl show" in everything
        assert main(["audit"]) == 0
        assert "budget 8 → 16  → rolled back" in capsys.readouterr().out
    finally:
        sim.stop()


def test_audit_into_a_closed_pipe_exits_0_without_a_traceback() -> None:
    log = AuditLog()
    for i in range(5000):
        log.append(AuditRecord("2026-12-01T00:00:00.000+00:00", "b300", f"tee -- /x{i}", 0, 0.1))
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "console", "audit", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=REPO,
    )
    assert proc.stdout is not None and proc.stderr is not None
    first = proc.stdout.readline()
    proc.stdout.close()  # `| head -1`
    code = proc.wait(timeout=30)
    stderr = proc.stderr.read().decode()
    assert json.loads(first)["host"] == "b300"
    assert code == 0 and "Traceback" not in stderr and "BrokenPipe" not in stderr, stderr
