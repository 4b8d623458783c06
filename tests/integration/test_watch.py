"""`specops watch`: a crash minutes after a kept change (probation) is rolled back by itself.

The simulated host follows the real timeline (console/sim/failures.py): `max_running=256`
under 200 requests survives its soak and dies in cuBLAS a while after ready (here seconds,
on a real host minutes). `watch` is started *after* the change was kept, so it knows the
probation only from the host's history. Ctrl-C during the countdown leaves the host alone;
outside probation, read-only or with auto_rollback = false, a crash is only an alert.
"""

from __future__ import annotations

import contextlib
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
from console.ledger import ledger
from console.sim.failures import FailureTiming
from console.sim.fleet import SimFleet, ThreadedSimFleet
from console.sim.sglang import Timing
from tests import pace

UNIT = "sglang-k26-ddtree.service"
DROPIN = f"/etc/systemd/system/{UNIT}.d/zz-specops.conf"
HISTORY = f"/var/lib/specops/{UNIT}/history.json"
CRASH_AFTER_S = 8.0
"""cuBLAS fails this long after ready: after the 1 s soak, and after `watch` has started."""


@pytest.fixture
def sim(tmp_path: Path) -> Iterator[ThreadedSimFleet]:
    late = FailureTiming(requests=200, cublas_after_s=CRASH_AFTER_S)
    timing = Timing(load_s=0.3, decode_interval_s=0.1, failures=late)
    fleet = ThreadedSimFleet(SimFleet(tmp_path / "sim", hosts=1, timing=timing, soak_s=1.0))
    fleet.start()
    yield fleet
    fleet.stop()


def service_lines(sim: ThreadedSimFleet, extra: str) -> None:
    """Add lines to the [service] table of the host's profile."""
    path = sim.fleet.profiles_dir / "b300.toml"
    text = path.read_text()
    path.write_text(text.replace("soak_s = 1\n", f"soak_s = 1\n{extra}\n", 1))


class Watching:
    """`specops watch` in its own process: its stdout lines, read as they come."""

    def __init__(self, profiles: Path, host: str, *args: str) -> None:
        self.stderr = profiles.parent / "watch.err"
        argv = [sys.executable, "-m", "console", "watch", host, *args, "--profiles", str(profiles)]
        with self.stderr.open("w") as err:
            self.proc = subprocess.Popen(
                argv, stdout=subprocess.PIPE, stderr=err, text=True, env=dict(os.environ)
            )
        self.lines: list[str] = []
        self._queue: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._queue.put(line)

    def wait_for(self, text: str, timeout: float = 60.0) -> str:
        deadline = pace.deadline(timeout)
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"never printed {text!r}; got:\n{self.output()}")
            try:
                line = self._queue.get(timeout=left)
            except queue.Empty:
                continue
            self.lines.append(line)
            if text in line:
                return line

    def drain(self, seconds: float) -> None:
        deadline = pace.deadline(seconds)
        while (left := deadline - time.monotonic()) > 0:
            with contextlib.suppress(queue.Empty):
                self.lines.append(self._queue.get(timeout=left))

    def interrupt(self) -> int:
        self.proc.send_signal(signal.SIGINT)
        code = self.proc.wait(30)
        self.drain(0.2)
        return code

    def output(self) -> str:
        return "".join(self.lines) + "\n--- stderr:\n" + self.stderr.read_text()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


def kept_change(sim: ThreadedSimFleet, capsys: pytest.CaptureFixture[str]) -> None:
    profiles = str(sim.fleet.profiles_dir)
    code = main(["set", "b300", "max_running=256", "--yes", "--profiles", profiles])
    captured = capsys.readouterr()
    assert code == 0, captured.out + captured.err
    assert "b300: applied max_running 32 → 256" in captured.out


def host_history(sim: ThreadedSimFleet) -> list[dict[str, object]]:
    path = sim.fleet.hosts["b300"].local(HISTORY)
    entries: list[dict[str, object]] = json.loads(path.read_text())["entries"]
    return entries


def test_a_crash_on_probation_is_rolled_back_by_watch_started_later(
    sim: ThreadedSimFleet, capsys: pytest.CaptureFixture[str]
) -> None:
    kept_change(sim, capsys)
    watch = Watching(sim.fleet.profiles_dir, "b300", "--countdown", "0.5")
    try:
        watch.wait_for("b300: probation 30m left (history entry 1")
        crash = watch.wait_for("after a kept change (probation, history entry 1)")
        assert "cublas" in crash
        watch.wait_for("b300: rolling back to history entry 0 (budget=8")
        done = watch.wait_for("probation rollback:", timeout=90)
        assert "back on history entry 0" in done, watch.output()
        # Back where it was: a rollback is no change to undo, so the probation ends.
        watch.wait_for("b300: no longer on probation (window over, a newer change, or a rollback)")
        assert watch.interrupt() == 0, watch.output()
    finally:
        watch.stop()
    assert not sim.fleet.hosts["b300"].local(DROPIN).exists()
    failed, rollback = host_history(sim)[1:3]
    assert failed["outcome"] == "rolled_back" and failed["stage"] == "probation"
    assert failed["signature"] == "cublas"
    assert "CUBLAS_STATUS_EXECUTION_FAILED" in str(failed["exception_line"])
    since = failed["kept_to_crash_s"]
    assert isinstance(since, float) and 0 < since < CRASH_AFTER_S + 5
    assert any("CUBLAS" in line for line in failed["excerpt"])  # type: ignore[attr-defined]
    assert rollback["kind"] == "rollback" and rollback["outcome"] == "kept"
    assert rollback["values"]["max_running"] == 32  # type: ignore[index]
    experiments = [e for _, e in ledger.load("b300")]
    assert [e.what.value for e in experiments] == ["set", "probation-rollback"]
    assert [e.source for e in experiments] == ["cli", "cli"]  # both made by the CLI
    assert experiments[-1].outcome == "kept"
    # `specops rollback`'s own way: the diff and every verified step were shown.
    err = watch.stderr.read_text()
    assert "--max-running-requests 256" in watch.output()
    assert "✓ soak" in err and "✓ smoke test" in err


def test_two_watches_roll_a_probation_crash_back_once(
    sim: ThreadedSimFleet, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two operators each run `watch`: both see the crash and count down, one rolls back,
    the other leaves the host to it. (On the testbed both once recorded the crash
    through one temporary file name: the second `mv` found nothing and its rollback
    "stopped"; without that accident both would have restarted the host.)"""
    kept_change(sim, capsys)
    watches = [Watching(sim.fleet.profiles_dir, "b300", "--countdown", "0.5") for _ in "ab"]
    try:
        done = [w.wait_for("b300: probation rollback:", timeout=90) for w in watches]
        assert sorted("back on history entry 0" in d for d in done) == [False, True], done
        (other,) = [d for d in done if "back on" not in d]
        # Left alone: the other console's claim was first, or (when this one's countdown
        # ended later) its rollback was already in the history.
        assert (
            "another console rolls it back: left to it" in other
            or "the host's history moved on: left alone" in other
        ), other
        for watch in watches:
            assert watch.interrupt() == 0, watch.output()
    finally:
        for watch in watches:
            watch.stop()
    entries = host_history(sim)
    assert [(e["kind"], e["outcome"]) for e in entries] == [
        ("original", "original"),
        ("change", "rolled_back"),
        ("rollback", "kept"),
    ]
    restarts = [c for c in sim.fleet.hosts["b300"].commands if c.startswith("systemctl restart")]
    assert len(restarts) == 2  # the change's and the one rollback's


def test_ctrl_c_during_the_countdown_leaves_the_host_alone(
    sim: ThreadedSimFleet, capsys: pytest.CaptureFixture[str]
) -> None:
    kept_change(sim, capsys)
    watch = Watching(sim.fleet.profiles_dir, "b300", "--countdown", "60")
    try:
        watch.wait_for("b300: probation 30m left")
        watch.wait_for("in 60s — Ctrl-C cancels")
        watch.proc.send_signal(signal.SIGINT)
        watch.wait_for("b300: rollback cancelled; left alone (still watching")
        assert watch.proc.poll() is None  # the first Ctrl-C only cancelled
        assert watch.interrupt() == 0, watch.output()
    finally:
        watch.stop()
    assert "--max-running-requests 256" in sim.fleet.hosts["b300"].local(DROPIN).read_text()
    entries = host_history(sim)
    assert len(entries) == 2  # no rollback entry
    assert entries[1]["outcome"] == "kept" and entries[1]["stage"] == "probation"
    assert "cancelled" in str(entries[1]["reason"])
    assert "probation rollback" not in watch.output()


@pytest.mark.parametrize(
    ("args", "profile_lines", "says", "history_noted"),
    [
        (("--read-only",), "", "read-only (--read-only): alert only", False),
        ((), "auto_rollback = false", "service.auto_rollback = false: not rolling back", True),
    ],
)
def test_read_only_and_auto_rollback_off_only_alert(
    sim: ThreadedSimFleet,
    capsys: pytest.CaptureFixture[str],
    args: tuple[str, ...],
    profile_lines: str,
    says: str,
    history_noted: bool,
) -> None:
    if profile_lines:
        service_lines(sim, profile_lines)
    kept_change(sim, capsys)
    watch = Watching(sim.fleet.profiles_dir, "b300", "--countdown", "0", *args)
    try:
        watch.wait_for("after a kept change (probation")
        watch.wait_for(says)
        watch.drain(3.0)
        assert watch.interrupt() == 0, watch.output()
    finally:
        watch.stop()
    assert "probation rollback" not in watch.output()
    assert "--max-running-requests 256" in sim.fleet.hosts["b300"].local(DROPIN).read_text()
    entries = host_history(sim)
    assert len(entries) == 2 and entries[1]["outcome"] == "kept"
    assert (entries[1]["stage"] == "probation") is history_noted


def test_a_crash_outside_probation_stays_an_alert(
    sim: ThreadedSimFleet, capsys: pytest.CaptureFixture[str]
) -> None:
    service_lines(sim, "probation_s = 2")
    kept_change(sim, capsys)
    watch = Watching(sim.fleet.profiles_dir, "b300", "--countdown", "0")
    try:
        crash = watch.wait_for("CRASH cublas")
        assert "(on probation)" not in crash
        watch.wait_for("b300: restarted")
        watch.drain(3.0)
        assert watch.interrupt() == 0, watch.output()
    finally:
        watch.stop()
    assert "after a kept change" not in watch.output()
    assert "probation rollback" not in watch.output()
    assert "--max-running-requests 256" in sim.fleet.hosts["b300"].local(DROPIN).read_text()
    assert len(host_history(sim)) == 2


def test_json_events_keep_stdout_to_json_lines(
    sim: ThreadedSimFleet, capsys: pytest.CaptureFixture[str]
) -> None:
    kept_change(sim, capsys)
    watch = Watching(sim.fleet.profiles_dir, "b300", "--countdown", "0.2", "--json")
    try:
        watch.wait_for('"event": "probation_crash"')
        watch.wait_for('"event": "probation_rollback"', timeout=90)
        assert watch.interrupt() == 0, watch.output()
    finally:
        watch.stop()
    records = [json.loads(line) for line in watch.lines]  # nothing but JSON on stdout
    crash = next(r for r in records if r["event"] == "probation_crash")
    assert crash["signature"] == "cublas" and crash["rollback"] is True and crash["entry"] == 1
    done = next(r for r in records if r["event"] == "probation_rollback")
    assert done["ok"] is True and "back on history entry 0" in done["detail"]
    err = watch.stderr.read_text()
    assert "b300: applied max_running 256 → 32; healthy" in err  # the rollout's own report
