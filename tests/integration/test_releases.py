"""`specops set` and `flags` on simulated hosts of different SGLang releases.

The host's release is read with the unit's own interpreter, and a friendly flag is written as
that release takes it (`console.service.catalogue`, built from the wheels' argparse).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from console.cli import flags as cli_flags
from console.cli import parse_args
from console.cli import set as cli_set
from console.cli import status as cli_status
from console.fleet.fleet import Fleet
from console.hosts.events import Event, ServiceStatus
from console.hosts.profiles import load_fleet
from console.sim.fleet import SimFleet
from tests.integration.conftest import FAST
from tests.integration.test_fleet import wait_for

UNIT = "sglang-k26-ddtree.service"
DROPIN = f"/etc/systemd/system/{UNIT}.d/zz-specops.conf"
VERSION_COMMAND = "-c 'import sglang; print(sglang.__version__)'"


@pytest.fixture
async def mixed(tmp_path: Path) -> AsyncIterator[SimFleet]:
    fleet = SimFleet(tmp_path / "sim", hosts=2, timing=FAST, versions=("0.5.23", "0.5.10"))
    await fleet.start()
    yield fleet
    await fleet.stop()


async def _set(fleet: SimFleet, *argv: str) -> int:
    args = parse_args(["set", *argv])
    args.profiles = str(fleet.profiles_dir)
    return await cli_set.cmd_set(args)


async def test_cuda_graph_off_on_0_5_23_writes_the_decode_backend_and_the_server_takes_it(
    mixed: SimFleet, capsys: pytest.CaptureFixture[str]
) -> None:
    assert await _set(mixed, "b300", "cuda_graph=off", "--yes") == 0
    captured = capsys.readouterr()
    assert "b300: applied cuda_graph on → off; healthy" in captured.out
    assert "--disable-cuda-graph is deprecated (SGLang 0.5.16 on)" in captured.err
    host = mixed.hosts["b300"]
    assert any(c.endswith(VERSION_COMMAND) for c in host.commands)
    dropin = host.local(DROPIN).read_text()
    assert "--cuda-graph-backend-decode disabled" in dropin
    assert "--disable-cuda-graph" not in dropin
    server = host.unit.server
    assert server is not None and server.config is not None and not server.config.cuda_graph
    flags = parse_args(["flags", "b300", "--json"])
    flags.profiles = str(mixed.profiles_dir)
    assert await cli_flags.cmd_flags(flags) == 0
    assert json.loads(capsys.readouterr().out)["flags"]["cuda_graph"]["value"] is False
    assert await _set(mixed, "b300", "cuda_graph=on", "--yes") == 0
    assert "--cuda-graph-backend-decode" not in host.local(DROPIN).read_text()


async def test_cuda_graph_off_on_0_5_10_writes_disable_cuda_graph(
    mixed: SimFleet, capsys: pytest.CaptureFixture[str]
) -> None:
    assert await _set(mixed, "pro6000", "cuda_graph=off", "--dry-run") == 0
    captured = capsys.readouterr()
    assert "+    --disable-cuda-graph" in captured.out
    assert "--cuda-graph-backend-decode" not in captured.out
    assert "SGLang 0.5.10 (the unit's interpreter)" in captured.err


async def test_a_removed_argument_exits_2_naming_its_replacement_before_touching_the_host(
    mixed: SimFleet, capsys: pytest.CaptureFixture[str]
) -> None:
    path = mixed.profiles_dir / "b300.toml"
    path.write_text(
        path.read_text().replace('arg = "--max-running-requests"', 'arg = "--cuda-graph-max-bs"')
    )
    host = mixed.hosts["b300"]
    before = list(host.commands)
    assert await _set(mixed, "b300", "max_running=16", "--yes") == 2
    err = capsys.readouterr().err
    assert "--cuda-graph-max-bs is gone in SGLang 0.5.23" in err
    assert "use --cuda-graph-max-bs-decode" in err
    assert "flags.max_running" in err
    sent = host.commands[len(before) :]
    assert all(c.startswith(("systemctl cat", "/opt/sglang")) for c in sent), sent
    assert not host.local(DROPIN).exists()


def _with_deprecated_argument(fleet: SimFleet, name: str) -> None:
    host = fleet.hosts[name]
    fragment = host.unit.local(host.unit.fragment)
    fragment.write_text(
        fragment.read_text().replace(
            "ExecStart=/opt/sglang/venv/bin/python3 -m sglang.launch_server",
            "ExecStart=/opt/sglang/venv/bin/python3 -m sglang.launch_server --disable-cuda-graph",
        )
    )
    host.unit.daemon_reload()


async def test_flags_marks_the_units_deprecated_arguments_with_their_replacement(
    mixed: SimFleet, capsys: pytest.CaptureFixture[str]
) -> None:
    _with_deprecated_argument(mixed, "b300")
    flags = parse_args(["flags", "b300", "--json"])
    flags.profiles = str(mixed.profiles_dir)
    assert await cli_flags.cmd_flags(flags) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["sglang_version"] == "0.5.23"
    assert record["flags"]["cuda_graph"]["value"] is False
    (mark,) = record["deprecated"]
    assert mark["arg"] == "--disable-cuda-graph" and mark["status"] == "deprecated"
    assert mark["replacement"] == "--cuda-graph-backend-{decode,prefill}=disabled"
    flags.json = False
    assert await cli_flags.cmd_flags(flags) == 0
    text = capsys.readouterr().out
    assert "SGLang 0.5.23" in text
    assert "--disable-cuda-graph is deprecated (SGLang 0.5.16 on); use" in text


async def test_status_names_each_hosts_release(
    mixed: SimFleet, capsys: pytest.CaptureFixture[str]
) -> None:
    args = parse_args(["status", "--json"])
    args.profiles = str(mixed.profiles_dir)
    assert await cli_status.cmd_status(args) == 0
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert {r["host"]: r["sglang_version"] for r in records} == {
        "b300": "0.5.23",
        "pro6000": "0.5.10",
    }
    args.json = False
    assert await cli_status.cmd_status(args) == 0
    table = capsys.readouterr().out
    assert "0.5.23" in table and "0.5.10" in table


async def test_the_fleet_status_carries_each_hosts_release(mixed: SimFleet) -> None:
    events: list[Event] = []
    fleet = Fleet(load_fleet(mixed.profiles_dir), poll_s=3600)
    fleet.listen(events.append)
    fleet.start()
    try:
        for name, version in (("b300", "0.5.23"), ("pro6000", "0.5.10")):
            status = await wait_for(
                events,
                lambda e, name=name: isinstance(e, ServiceStatus) and e.host == name,
            )
            assert isinstance(status, ServiceStatus) and status.sglang_version == version
    finally:
        await fleet.stop()


async def test_the_rollout_shows_the_deprecation_warnings_the_server_printed(
    mixed: SimFleet, capsys: pytest.CaptureFixture[str]
) -> None:
    _with_deprecated_argument(mixed, "b300")
    assert await _set(mixed, "b300", "max_running=16", "--yes") == 0
    err = capsys.readouterr().err
    assert (
        "b300 at start-up: '--disable-cuda-graph' is deprecated and will be removed in a future "
        "release. Use '--cuda-graph-backend-{decode,prefill}=disabled' instead." in err
    )


async def test_a_liveness_only_health_is_not_taken_for_readiness(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """0.4.10's `/health` answers 200 while the model loads; readiness asks /health_generate."""
    fleet = SimFleet(tmp_path / "old", hosts=1, timing=FAST, versions=("0.4.10",))
    await fleet.start()
    try:
        assert await _set(fleet, "b300", "max_running=16", "--yes") == 0
        captured = capsys.readouterr()
        assert "b300: applied max_running 32 → 16; healthy" in captured.out
    finally:
        await fleet.stop()
