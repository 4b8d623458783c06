"""Edge cases from the attack run (issue 20) against the simulated fleet: snapshots, status."""

from __future__ import annotations

from pathlib import Path

import pytest

from console.cli import parse_args
from console.cli.flags import cmd_flags
from console.cli.status import cmd_status
from console.package.manifest import MANIFEST_NAME
from console.sim.fleet import SimFleet
from tests.integration.test_snapshot import records, snapshot


async def test_an_unreachable_host_alone_leaves_no_empty_manifest(
    sim: SimFleet, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    await sim.hosts["pro6000"].go_offline()
    package = tmp_path / "pkg"
    assert await snapshot(sim, package, "pro6000", "--json") == 3
    assert records(capsys.readouterr().out)["pro6000"]["outcome"] == "unreachable"
    assert not (package / MANIFEST_NAME).exists()  # no manifest claiming an empty package
    # Nor an empty directory left where the package was to be (the second attack run).
    assert not package.exists() or any(package.rglob("*.*")), sorted(package.rglob("*"))


async def test_status_and_flags_say_when_the_files_are_not_what_runs(
    sim: SimFleet, capsys: pytest.CaptureFixture[str]
) -> None:
    """After an interrupted change (drop-in written, no daemon-reload) the text says so."""
    host = sim.hosts["b300"]
    dropin = host.root / "etc/systemd/system/sglang-k26-ddtree.service.d/zz-specops.conf"
    dropin.parent.mkdir(parents=True, exist_ok=True)
    dropin.write_text('[Service]\nEnvironment="SGLANG_DDTREE_MAX_TOPK=8"\n')
    profiles = ["--profiles", str(sim.profiles_dir)]
    assert await cmd_status(parse_args(["status", "b300", *profiles])) == 0
    said = " ".join(capsys.readouterr().out.split())
    assert "NeedDaemonReload=yes" in said
    assert await cmd_flags(parse_args(["flags", "b300", *profiles])) == 0
    said = " ".join(capsys.readouterr().out.split())
    assert "NeedDaemonReload=yes: the flags are the files', not the running command's" in said
