"""Files the console writes for the operator (package, report, manifest) follow their umask."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from console.local.files import publish_replacing, umask, write_file


def test_a_shared_file_has_the_mode_asked_less_the_umask(tmp_path: Path) -> None:
    target = tmp_path / "REPORT.md"
    write_file(target, b"x", publish_replacing, mode=0o644)
    assert target.stat().st_mode & 0o777 == 0o644 & ~umask()
    assert umask() == int(Path("/proc/self/status").read_text().split("Umask:")[1].split()[0], 8)


def test_under_umask_077_it_stays_private(tmp_path: Path) -> None:
    """The attack run (issue 30): files were 0644 under umask 077, readable by every user."""
    target = tmp_path / "MANIFEST.sha256"
    code = (
        "import os, sys; from pathlib import Path; os.umask(0o077);"
        "from console.local.files import publish_replacing, umask, write_file;"
        "write_file(Path(sys.argv[1]), b'x', publish_replacing, mode=0o644)"
    )
    subprocess.run([sys.executable, "-c", code, str(target)], check=True)
    assert target.stat().st_mode & 0o777 == 0o600
