"""`specops demo` in a real terminal (tmux), driven by keys and read back from the pane."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

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
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = self.text()
            if text.count(needle) >= times:
                return text
            time.sleep(0.1)
        raise AssertionError(f"{needle!r} never appeared; the pane shows:\n{self.text()}")

    def wait_gone(self, needle: str, timeout: float = 10.0) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = self.text()
            if needle not in text:
                return text
            time.sleep(0.1)
        raise AssertionError(f"{needle!r} is still on screen:\n{self.text()}")


@pytest.fixture
def pane(isolated_home: Path, tmp_path: Path) -> Iterator[Pane]:
    socket = f"specops-e2e-{os.getpid()}"
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
        f"echo $? > {marker}; sleep 30"
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
            "120",
            "-y",
            "36",
            command,
        ],
        check=True,
        cwd=tmp_path,
    )
    p.marker = marker
    p.home = isolated_home
    try:
        yield p
    finally:
        subprocess.run(["tmux", "-L", socket, "kill-server"], capture_output=True)


def test_a_person_picks_a_host_snapshots_opens_flags_reads_help_and_quits(pane: Pane) -> None:
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
    screen = pane.wait_for("flags · pro6000")
    assert "budget" in screen and "cuda_graph" in screen
    pane.keys("Escape")
    pane.wait_gone("flags · pro6000")

    pane.keys("?")
    screen = pane.wait_for("specops — keys")
    assert "snapshot-host" in screen
    pane.keys("Escape")
    pane.wait_gone("specops — keys")

    pane.keys("q")
    deadline = time.monotonic() + 15
    marker = pane.marker
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert marker.read_text().strip() == "0"
    screen = pane.text()
    assert "journal ·" not in screen  # the app is gone and the terminal is back to normal
    assert "demo files kept in" in pane.history()  # the demo's own directory, where its state went
    assert not (pane.home / ".local" / "state" / "specops").exists()
