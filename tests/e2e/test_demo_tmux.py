"""`specops demo` in a real terminal (tmux), driven by keys and read back from the pane."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import pace

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")

SESSION = "specops-e2e"


class Pane:
    def __init__(self, socket: str) -> None:
        self.socket = socket
        self.home = Path()
        self.marker = Path()

    def tmux(self, *args: str) -> str:
        result = subprocess.run(
            ["tmux", "-L", self.socket, *args], capture_output=True, text=True, timeout=10
        )
        return result.stdout

    def text(self) -> str:
        return self.tmux("capture-pane", "-p", "-t", SESSION)

    def history(self) -> str:
        """The pane's text with its scrollback (what was printed after the app left)."""
        return self.tmux("capture-pane", "-p", "-S", "-100", "-t", SESSION)

    def keys(self, *keys: str) -> None:
        self.tmux("send-keys", "-t", SESSION, *keys)

    def wait_for(self, needle: str, timeout: float = 20.0, times: int = 1) -> str:
        """The pane's text once `needle` shows `times` times (hosts connect one by one)."""
        deadline = pace.deadline(timeout)
        while time.monotonic() < deadline:
            text = self.text()
            if text.count(needle) >= times:
                return text
            time.sleep(0.1)
        raise AssertionError(f"{needle!r} never appeared; the pane shows:\n{self.text()}")

    def wait_gone(self, needle: str, timeout: float = 10.0) -> str:
        deadline = pace.deadline(timeout)
        while time.monotonic() < deadline:
            text = self.text()
            if needle not in text:
                return text
            time.sleep(0.1)
        raise AssertionError(f"{needle!r} is still on screen:\n{self.text()}")


@pytest.fixture
def pane(isolated_home: Path, tmp_path: Path) -> Iterator[Pane]:
    yield from _demo_pane(isolated_home, tmp_path, 120, 36)


@pytest.fixture
def small_pane(isolated_home: Path, tmp_path: Path) -> Iterator[Pane]:
    yield from _demo_pane(isolated_home, tmp_path, 80, 24)


def _demo_pane(isolated_home: Path, tmp_path: Path, width: int, height: int) -> Iterator[Pane]:
    socket = f"specops-e2e-{os.getpid()}-{width}"
    p = Pane(socket)
    marker = tmp_path / "exited"
    env = {
        "HOME": str(isolated_home),
        "XDG_CONFIG_HOME": str(isolated_home / ".config"),
        "XDG_STATE_HOME": str(isolated_home / ".local" / "state"),
        "TERM": "xterm-256color",
        "PATH": os.environ.get("PATH", ""),
        "PYTHONPATH": str(Path(__file__).resolve().parents[2]),  # this tree, not an install
    }
    exports = " ".join(f"{k}={v!r}" for k, v in env.items())
    command = (
        f"env -i {exports} {sys.executable} -m console demo --load-delay 1; "
        # Written whole, then named: the test read an empty marker the shell had only created.
        f"echo $? > {marker}.part && mv {marker}.part {marker}; sleep 30"
    )
    subprocess.run(
        [
            "tmux",
            "-L",
            socket,
            "new-session",
            "-d",
            "-s",
            SESSION,
            "-x",
            str(width),
            "-y",
            str(height),
            command,
        ],
        check=True,
        cwd=tmp_path,  # also the session's directory: `-m console` must not find another tree
    )
    p.marker = marker
    p.home = isolated_home
    try:
        yield p
    finally:
        subprocess.run(["tmux", "-L", socket, "kill-server"], capture_output=True)


def test_a_person_picks_a_host_snapshots_opens_flags_and_history_reads_help_and_quits(
    pane: Pane,
) -> None:
    screen = pane.wait_for("accept len", timeout=30)
    assert "b300" in screen and "pro6000" in screen
    screen = pane.wait_for("connected", timeout=30, times=2)
    assert "unreachable" not in screen

    pane.keys("2")
    pane.wait_for("journal · pro6000")

    pane.keys("s")
    screen = pane.wait_for("snapshot · done", timeout=30)
    assert "MANIFEST.sha256" in screen
    pane.keys("Escape")
    pane.wait_gone("snapshot · done")

    pane.keys("f")
    pane.wait_for("flags · pro6000")
    screen = pane.wait_for("cuda_graph")  # its rows may come a frame after its title
    assert "budget" in screen
    pane.keys("Escape")
    pane.wait_gone("flags · pro6000")

    pane.keys("h")  # the host's own history: never changed yet
    screen = pane.wait_for("specops never changed")
    assert "history · pro6000" in screen
    pane.keys("Escape")
    pane.wait_gone("history · pro6000")

    pane.keys("?")
    screen = pane.wait_for("snapshot-host")  # the title may be painted before the table
    assert "specops — keys" in screen
    pane.keys("Escape")
    pane.wait_gone("specops — keys")

    pane.keys("q")
    deadline = pace.deadline(15)
    marker = pane.marker
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert marker.read_text().strip() == "0"
    screen = pane.text()
    assert "journal ·" not in screen  # the app is gone and the terminal is back to normal
    # Nothing but the demo's own line is printed around the app: no warning at start-up, no
    # "Task was destroyed but it is pending!" on the way out.
    printed = [line for line in pane.history().splitlines() if line.strip()]
    assert printed and printed[0].startswith("demo files kept in"), printed  # its directory
    assert len(printed) <= 2, printed  # that one line, wrapped at most once
    assert not (pane.home / ".local" / "state" / "specops").exists()


ROW = re.compile(
    r"│\s*(?P<host>b300|pro6000)\s+connected\s+(?P<health>\S+)\s+.*?"
    r"(?P<accept>\d\.\d\d)\s+(?P<tps>\d{3,5})\s"
)


def test_at_80x24_the_table_reads_health_accept_and_tok_s(small_pane: Pane) -> None:
    small_pane.wait_for("accept len", timeout=30)
    deadline = pace.deadline(30)
    rows: dict[str, re.Match[str]] = {}
    # While the server starts, /health reads 503 or closed; polled every 5 s.
    while time.monotonic() < deadline and [r["health"] for r in rows.values()] != ["ok", "ok"]:
        rows = {m["host"]: m for m in map(ROW.search, small_pane.text().splitlines()) if m}
        time.sleep(0.2)
    screen = small_pane.text()
    assert set(rows) == {"b300", "pro6000"}, screen
    header = next(line for line in screen.splitlines() if "connection" in line)
    for column in ("host", "connection", "health", "accept", "tok/s"):
        assert column in header
    for row in rows.values():
        assert row["health"] == "ok"
        assert 3.0 < float(row["accept"]) < 7.0 and 500 < int(row["tps"]) < 3000
    small_pane.keys("q")
