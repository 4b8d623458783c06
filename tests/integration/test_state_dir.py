"""The host's state directory: where specops records every change before it restarts
anything. On a host where it cannot be written (a read-only file system), `set --dry-run`,
`set` and the group plan refuse before any host changes, naming the directory and the
profile field, and nothing is recorded for a change that never ran; `status` says so; a
profile's `service.state_dir` moves it."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from console.cli import parse_args
from console.cli import set as cli_set
from console.cli.status import cmd_status
from console.ledger.ledger import cache_dir
from console.sim.fleet import SimFleet
from console.sim.sglang import Timing

UNIT = "sglang-k26-ddtree.service"
CHANGING = ("systemctl restart", "systemctl daemon-reload", "tee ", "mv ", "install ")


@pytest.fixture
async def sim(tmp_path: Path) -> AsyncIterator[SimFleet]:
    fleet = SimFleet(tmp_path / "sim", hosts=1, timing=Timing(load_s=0.3, decode_interval_s=0.1))
    await fleet.start()
    try:
        yield fleet
    finally:
        await asyncio.wait_for(fleet.stop(), 10)


def changing(sim: SimFleet) -> list[str]:
    return [c for c in sim.hosts["b300"].commands if c.startswith(CHANGING)]


async def specops(sim: SimFleet, *argv: str) -> int:
    args = parse_args([*argv, "--profiles", str(sim.profiles_dir)])
    if argv[0] == "status":
        return await cmd_status(args)
    return await cli_set.cmd_set(args)


async def test_a_read_only_state_directory_refuses_set_before_anything_changes(
    sim: SimFleet, capsys: pytest.CaptureFixture[str]
) -> None:
    sim.hosts["b300"].local("/var/lib/specops").mkdir(parents=True)  # a read-only mount
    sim.hosts["b300"].read_only.add("/var/lib/specops")
    for extra in ("--dry-run", "--yes"):
        assert await specops(sim, "set", "b300", "budget=4", extra) == 1
        said = capsys.readouterr().err
        assert f"/var/lib/specops/{UNIT} cannot be written" in said
        assert "/var/lib/specops refuses writes" in said and "service.state_dir" in said
        assert "nothing was changed" in said
    assert changing(sim) == []
    assert not cache_dir("b300").exists() or not list(cache_dir("b300").iterdir())

    assert await specops(sim, "status", "b300", "--json") == 0
    (record,) = map(json.loads, capsys.readouterr().out.splitlines())
    assert record["state_dir"]["writable"] is False
    assert "cannot be written" in record["state_dir"]["problem"]
    assert await specops(sim, "status", "b300") == 0
    assert "b300: /var/lib/specops/" in capsys.readouterr().out


async def test_the_profile_moves_the_state_directory(
    sim: SimFleet, capsys: pytest.CaptureFixture[str]
) -> None:
    host = sim.hosts["b300"]
    host.local("/var/lib/specops").mkdir(parents=True)
    host.read_only.add("/var/lib/specops")
    path = sim.profiles_dir / "b300.toml"
    text = path.read_text()
    path.write_text(text.replace("soak_s = ", 'state_dir = "/srv/specops"\nsoak_s = ', 1))
    assert await specops(sim, "set", "b300", "budget=4", "--yes") == 0, capsys.readouterr()
    entries = json.loads(host.local(f"/srv/specops/{UNIT}/history.json").read_text())["entries"]
    assert entries[-1]["outcome"] == "kept" and entries[-1]["values"]["budget"] == 4
    assert list(host.local(f"/srv/specops/{UNIT}/experiments").glob("*.json"))
    assert not list(host.local("/var/lib/specops").iterdir())
    capsys.readouterr()
    assert await specops(sim, "status", "b300", "--json") == 0
    (record,) = map(json.loads, capsys.readouterr().out.splitlines())
    assert record["state_dir"] == {"path": "/srv/specops", "writable": True}
