"""House rules that CI enforces: the core never loads Textual; ruff, mypy and import-linter pass."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

CORE = [
    "console.profiles",
    "console.ssh",
    "console.remote",
    "console.journal",
    "console.fleet",
    "console.events",
    "console.cli",
    "console.sim.fleet",
    "console.sim.host",
    "console.flags",
    "console.sglang",
    "console.signatures",
    "console.monitor",
    "console.cli_tail",
    "console.metrics",
    "console.manifest",
    "console.audit",
    "console.http",
    "console.plan",
    "console.rollout",
    "console.invocation",
    "console.state",
    "console.cli_flags",
    "console.smoke",
]


def test_importing_the_core_loads_no_textual() -> None:
    code = (
        "import importlib, sys\n"
        f"for name in {CORE!r}:\n"
        "    importlib.import_module(name)\n"
        "bad = sorted(m for m in sys.modules\n"
        "             if m == 'textual' or m.startswith(('textual.', 'widgets')))\n"
        "print(','.join(bad))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == ""


def _tool(name: str) -> list[str]:
    exe = shutil.which(name)
    if exe is None:
        pytest.fail(f"{name} is not installed: pip install -e '.[test]'")
    return [exe]


def test_ruff_clean() -> None:
    result = subprocess.run(
        [*_tool("ruff"), "check", "."], cwd=REPO, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_clean() -> None:
    result = subprocess.run(_tool("mypy"), cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_import_contracts() -> None:
    result = subprocess.run(_tool("lint-imports"), cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
