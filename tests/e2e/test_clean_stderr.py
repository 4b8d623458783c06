"""The first thing a newcomer sees: `specops --help` and friends print their help and nothing
on stderr (asyncssh's import once put ten lines of cryptography's DSA deprecation there).
The demo's quit is checked in test_demo_tmux.py, from the terminal it ran in."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def specops() -> list[str]:
    """The console script as a user runs it (this tree's module when it is not installed)."""
    script = shutil.which("specops")
    return [script] if script else [sys.executable, "-m", "console"]


@pytest.mark.parametrize("argv", [["--help"], ["status", "--help"], ["set", "--help"]])
def test_help_prints_nothing_on_stderr(argv: list[str], tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHONWARNINGS")}
    env["PYTHONPATH"] = str(REPO)
    result = subprocess.run(
        [*specops(), *argv], capture_output=True, text=True, timeout=60, cwd=tmp_path, env=env
    )
    assert result.returncode == 0
    assert "usage: specops" in result.stdout
    assert result.stderr == ""
