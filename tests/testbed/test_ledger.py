"""The experiment ledger on real hosts: a change made through `specops set` lands on the host
under /var/lib/specops/UNIT/experiments/ (real sh, tr and rename through OpenSSH), and a
second console, with its own profile directory naming the host differently and its own
state, reads the same experiments with `specops compare` and mirrors them into its package."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.testbed.bed import Testbed
from tests.testbed.layout import UNIT

pytestmark = pytest.mark.testbed


def specops(*argv: str, state: Path, timeout: float = 180) -> tuple[int, str, str]:
    """One console: its own state directory (so no cache is shared between the two)."""
    env = {**os.environ, "SPECOPS_STATE_DIR": str(state), "COLUMNS": "200"}
    proc = subprocess.run(
        [sys.executable, "-m", "console", *argv],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )
    return proc.returncode, proc.stdout, proc.stderr


@pytest.mark.timeout(400)
def test_experiments_land_on_the_host_and_another_console_sees_them(
    bed: Testbed, tmp_path: Path
) -> None:
    host = bed.hosts[0]
    first, second = tmp_path / "console-1", tmp_path / "console-2"
    code, out, err = specops(
        "set", host.name, "budget=16", "cuda_graph=false", "--yes", "--soak", "3",
        "--profiles", str(bed.profiles_dir), state=first,
    )  # fmt: skip
    assert code == 0, out + err
    directory = f"/var/lib/specops/{UNIT}/experiments"
    listed = host.run("ls", "-A", directory).stdout.split()  # asked on the host itself
    assert len(listed) == 1 and listed[0].endswith(".json"), listed  # no temporary left
    on_host = json.loads(host.run("cat", f"{directory}/{listed[0]}").stdout)
    assert on_host["outcome"] == "kept" and on_host["host"] == host.name
    assert on_host["after"]["flags"]["budget"] == 16
    assert on_host["after"]["windows"]["accept_len"]["count"] > 0
    assert f"experiment recorded on the host: {directory}/{listed[0]}" in out

    # Another operator: another profile directory, another name for the same host.
    other = tmp_path / "profiles-2"
    other.mkdir()
    text = (bed.profiles_dir / f"{host.name}.toml").read_text()
    (other / "gpu-a.toml").write_text(text.replace(f'name = "{host.name}"', 'name = "gpu-a"'))
    code, out, err = specops("compare", "gpu-a", "--json", "--profiles", str(other), state=second)
    assert code == 0, out + err
    record = json.loads(out)
    assert record["read_from"] == f"the host's ledger ({directory})"
    after = next(c for c in record["configurations"] if c["number"] == record["b"])
    assert after["flags"]["budget"] == 16 and after["flags"]["cuda_graph"] is False
    assert (second / "experiments" / "gpu-a" / listed[0]).is_file()  # its cache now

    # Its snapshot mirrors the host's ledger, byte for byte, into its own package.
    package = tmp_path / "package-2"
    code, out, err = specops(
        "snapshot", "gpu-a", "--package", str(package), "--profiles", str(other),
        state=second,
    )  # fmt: skip
    assert code == 0, out + err
    mirrored = package / "experiments" / "gpu-a" / listed[0]
    assert mirrored.read_text() == host.run("cat", f"{directory}/{listed[0]}").stdout
    check = subprocess.run(
        ["sha256sum", "--strict", "-c", "MANIFEST.sha256"], cwd=package, capture_output=True
    )
    assert check.returncode == 0, check.stdout
