"""The simulated host's `sh` answers specops' directory-reading script exactly as a real
POSIX shell (dash, Debian's /bin/sh) does on the same files: dot files (a writer's temporary)
and directories left out, line breaks taken out of each file, files in name order, nothing for
a missing directory."""

from __future__ import annotations

import asyncio
import io
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from console.sim.shell import sh
from console.transport.remote import READ_JSON_FILES

pytestmark = pytest.mark.skipif(shutil.which("dash") is None, reason="needs dash")


class _Host:
    def __init__(self, root: Path) -> None:
        self.root = root

    def local(self, path: str) -> Path:
        return self.root / path.lstrip("/")


class _Process:
    def __init__(self) -> None:
        self.stdout, self.stderr = io.StringIO(), io.StringIO()


def _simulated(root: Path, directory: str) -> tuple[int, str]:
    process = _Process()
    host: Any = _Host(root)
    code = asyncio.run(sh(host, process, ["sh", "-c", READ_JSON_FILES, "sh", directory]))  # type: ignore[arg-type]
    return code, process.stdout.getvalue()


def _real(root: Path, directory: str) -> tuple[int, str]:
    target = str(root / directory.lstrip("/"))
    done = subprocess.run(
        ["dash", "-c", READ_JSON_FILES, "sh", target], capture_output=True, text=True
    )
    return done.returncode, done.stdout


def test_the_simulated_sh_reads_a_ledger_directory_as_dash_does(tmp_path: Path) -> None:
    ledger = tmp_path / "var/lib/specops/u.service/experiments"
    ledger.mkdir(parents=True)
    (ledger / "20261204T010000Z-aaaa.json").write_text('{\n  "a": "x\\ny",\n  "b": [1, 2]\n}\n')
    (ledger / "20261203T230000Z-bbbb.json").write_text('{"c": 3}')
    (ledger / ".20261204T020000Z-cccc.json.tmp").write_text('{"half": ')
    (ledger / "notes.txt").write_text("not a record\n")
    (ledger / "sub.json").mkdir()
    directory = "/var/lib/specops/u.service/experiments"
    real = _real(tmp_path, directory)
    assert real == (
        0,
        '20261203T230000Z-bbbb.json\n{"c": 3}\n'
        '20261204T010000Z-aaaa.json\n{  "a": "x\\ny",  "b": [1, 2]}\n',
    )
    assert _simulated(tmp_path, directory) == real
    assert _real(tmp_path, "/var/lib/specops/gone") == (0, "")
    assert _simulated(tmp_path, "/var/lib/specops/gone") == (0, "")
