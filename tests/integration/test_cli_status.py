"""`specops status` as a user runs it: health beside systemd's word, switches as on/off."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import asyncssh
import pytest

from console.cli import main
from console.sim.fleet import SimFleet, ThreadedSimFleet
from console.sim.sglang import Timing
from tests import pace


def test_status_reports_health_and_spells_switches_on_off(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sim = ThreadedSimFleet(
        SimFleet(tmp_path / "sim", hosts=2, timing=Timing(load_s=0.2, decode_interval_s=0.2))
    )
    sim.start()
    try:
        hosts = sim.fleet.hosts
        deadline = pace.deadline(10)
        while not all(  # decoding: /metrics has a batch to report
            h.unit.server is not None and h.unit.server._accept_n for h in hosts.values()
        ):
            assert time.monotonic() < deadline
            time.sleep(0.05)
        server = hosts["pro6000"].unit.server
        assert server is not None
        server.unhealthy = True
        hosts["b300"].gpus = ["NVIDIA H100 80GB HBM3"] * 8  # pro6000 has no nvidia-smi
        profiles = str(sim.fleet.profiles_dir)
        assert main(["status", "--json", "--profiles", profiles]) == 0
        records = {r["host"]: r for r in map(json.loads, capsys.readouterr().out.splitlines())}
        gpus = records["b300"]["gpus"]  # issue 33: nvidia-smi's query, read by its header
        assert [g["index"] for g in gpus] == list(range(8))
        assert gpus[0]["name"] == "NVIDIA H100 80GB HBM3" and gpus[0]["memory_total_mib"] == 81559
        assert gpus[0]["util_pct"] == 100 and gpus[0]["clock_events"] == ["sw_power_cap"]
        assert "gpu_problem" not in records["b300"]
        assert records["pro6000"]["gpus"] == []
        assert records["pro6000"]["gpu_problem"].startswith("no GPU tool")
        audit = (Path.home() / ".local" / "state" / "specops" / "audit.jsonl").read_text()
        assert "systemctl" in audit and "nvidia-smi" not in audit  # a read, not an action
        assert any("nvidia-smi" in c for c in hosts["b300"].commands)
        assert records["b300"]["health"] == "ok"
        assert records["pro6000"]["health"] == "503"
        assert records["pro6000"]["sub_state"] == "running"
        kv = records["b300"]["kv_cache"]  # from the server's /metrics (issue 41)
        assert 0 < kv["token_usage"] < 1 and kv["used_tokens"] >= 1
        assert main(["status", "--profiles", profiles]) == 0
        shown = capsys.readouterr().out
        assert "cuda_graph=on" in shown and "True" not in shown
        assert "% used" in shown  # KV cache 42% used
        assert "b300: 8 GPUs, fullest " in shown and "sw_power_cap on all" in shown
        assert "pro6000: no GPU tool" in shown
        assert "503" in shown
        assert main(["flags", "b300", "--profiles", profiles]) == 0
        table = capsys.readouterr().out
        assert "--disable-cuda-graph when off" in table and "no --disable" not in table
    finally:
        sim.stop()


def test_status_over_many_hosts_connects_under_the_settings_budget(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Twelve hosts, `connect_budget = 3`: never more than three key exchanges at once, and
    every host still reported connected."""
    sim = ThreadedSimFleet(
        SimFleet(tmp_path / "sim", hosts=12, timing=Timing(load_s=0.1, decode_interval_s=5))
    )
    sim.start()
    in_flight = peak = 0
    real_connect = asyncssh.connect

    async def counted(*args: Any, **kwargs: Any) -> asyncssh.SSHClientConnection:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        try:
            await asyncio.sleep(0.05)  # a slow link: without the budget all twelve overlap
            return await real_connect(*args, **kwargs)
        finally:
            in_flight -= 1

    monkeypatch.setattr(asyncssh, "connect", counted)  # the client's, as ssh.py calls it
    monkeypatch.setenv("SPECOPS_CONNECT_BUDGET", "3")
    try:
        assert main(["status", "--json", "--profiles", str(sim.fleet.profiles_dir)]) == 0
        records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
        assert len(records) == 12
        assert all(r["connection"] == "connected" for r in records)
        assert peak == 3
    finally:
        sim.stop()


def test_an_unreachable_host_says_what_was_tried_and_no_retry_it_will_not_make(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 41: `status --json` said "Connection refused; retry in 0s": no address, port or
    user, and a retry a one-shot command never makes."""
    sim = SimFleet(tmp_path / "sim", hosts=1, timing=Timing(load_s=0.2, decode_interval_s=0.2))
    profile = sim.profiles_dir / "b300.toml"
    asyncio.run(sim.start())
    asyncio.run(sim.stop())  # nothing listens on its port any more
    assert main(["status", "--json", "--profiles", str(sim.profiles_dir)]) == 3
    (record,) = map(json.loads, capsys.readouterr().out.splitlines())
    assert record["connection"] == "unreachable" and record["health"] is None  # key always there
    port = next(line for line in profile.read_text().splitlines() if line.startswith("port"))
    assert f"127.0.0.1:{port.split('=')[1].strip()})" in record["detail"]
    assert "retry" not in record["detail"]


def test_status_names_a_probation_and_that_only_a_watch_acts_on_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sim = ThreadedSimFleet(
        SimFleet(tmp_path / "sim", hosts=1, timing=Timing(load_s=0.2, decode_interval_s=0.1))
    )
    sim.start()
    try:
        profiles = str(sim.fleet.profiles_dir)
        assert main(["status", "--json", "--profiles", profiles]) == 0
        (before,) = map(json.loads, capsys.readouterr().out.splitlines())
        assert "probation" not in before
        assert main(["set", "b300", "budget=4", "--yes", "--profiles", profiles]) == 0
        capsys.readouterr()
        assert main(["status", "--json", "--profiles", profiles]) == 0
        (after,) = map(json.loads, capsys.readouterr().out.splitlines())
        assert after["probation"]["entry"] == 1 and 1700 < after["probation"]["left_s"] <= 1800
        assert main(["status", "--profiles", profiles]) == 0
        said = capsys.readouterr().out.replace("\n", " ")
        assert "b300: probation 30m left (history entry 1)" in said
        assert "only while `specops watch` or the TUI runs" in said
    finally:
        sim.stop()
