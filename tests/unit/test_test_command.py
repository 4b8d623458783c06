"""The README's test command is the one CI runs, and it sets up what the tests need."""

from __future__ import annotations

import os
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def readme_test_command() -> str:
    text = (REPO / "README.md").read_text()
    match = re.search(r"and the test command[^\n]*\n\n```sh\n(?P<cmd>[^\n]+)\n```", text)
    assert match is not None, "README: no test command block under 'Two commands'"
    return match["cmd"].strip()


def test_ci_runs_exactly_the_readme_command_which_installs_the_testbed_needs() -> None:
    command = readme_test_command()
    assert command == "scripts/test"
    script = REPO / command
    assert os.access(script, os.X_OK)
    body = script.read_text()
    for package in ("openssh-server", "systemd", "tmux", "iproute2"):
        assert package in body
    assert "exec python3 -m pytest -q -p no:cacheprovider" in body  # pytest's status is ours
    ci = [ln for ln in (REPO / ".ci" / "run").read_text().splitlines() if ln.strip()]
    assert ci[-1] == command and "set -euo pipefail" in ci
