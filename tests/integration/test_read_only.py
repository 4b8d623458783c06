"""Read-only from every source refuses `set` and `rollback` before any host is touched.

Finding of the attack run (issue 20): `read_only = true` in settings.toml and
`SPECOPS_READ_ONLY=1` were ignored by `set`: a change was applied and the service restarted.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from console.cli import main
from console.local.audit import AuditLog
from console.sim.fleet import SimFleet, ThreadedSimFleet
from console.sim.sglang import Timing


@pytest.fixture
def fleet(tmp_path: Path) -> Iterator[ThreadedSimFleet]:
    sim = ThreadedSimFleet(
        SimFleet(tmp_path / "sim", hosts=1, timing=Timing(load_s=0.3, decode_interval_s=0.1))
    )
    sim.start()
    yield sim
    sim.stop()


@pytest.mark.parametrize("command", [["set", "b300", "budget=4"], ["rollback", "b300"]])
@pytest.mark.parametrize("source", ["flag", "settings", "environment"])
def test_every_read_only_source_refuses_a_change_before_connecting(
    fleet: ThreadedSimFleet,
    tmp_path: Path,
    source: str,
    command: list[str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = [*command, "--yes", "--profiles", str(fleet.fleet.profiles_dir)]
    if source == "flag":
        argv.append("--read-only")
        said = "--read-only"
    elif source == "settings":
        settings = tmp_path / "settings.toml"
        settings.write_text("read_only = true\n")
        monkeypatch.setenv("SPECOPS_SETTINGS", str(settings))
        said = f"read_only = true in {settings}"
    else:
        monkeypatch.setenv("SPECOPS_READ_ONLY", "1")
        said = "SPECOPS_READ_ONLY=1"
    assert main(argv) == 2
    assert f"refusing to change b300: {said} (try --dry-run)" in capsys.readouterr().err
    assert list(AuditLog().read()) == []  # not one command reached the host
    assert fleet.fleet.hosts["b300"].commands == []
    # a dry run still works: it changes nothing (a host with no history has nothing to roll
    # back to: exit 1, but past the read-only refusal)
    assert main([*argv, "--dry-run"]) == (0 if command[0] == "set" else 1)
    assert "refusing" not in capsys.readouterr().err


def test_environment_false_overrides_the_file(
    fleet: ThreadedSimFleet, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = tmp_path / "settings.toml"
    settings.write_text("read_only = true\n")
    monkeypatch.setenv("SPECOPS_SETTINGS", str(settings))
    monkeypatch.setenv("SPECOPS_READ_ONLY", "false")
    argv = ["set", "b300", "budget=8", "--yes", "--dry-run"]
    assert main([*argv, "--profiles", str(fleet.fleet.profiles_dir)]) == 0
