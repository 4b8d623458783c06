"""Snapshot edge cases from the attack run (issue 20) against the simulated fleet."""

from __future__ import annotations

from pathlib import Path

import pytest

from console.evidence.manifest import MANIFEST_NAME
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
