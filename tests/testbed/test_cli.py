"""`specops status` against real hosts: systemd's view of the unit, flags from `systemctl cat`."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from console.cli import main
from console.cli.common import EXIT_UNREACHABLE
from console.transport import remote
from tests.testbed.bed import Testbed
from tests.testbed.hosts import Host
from tests.testbed.layout import SIM_PYTHON, UNIT

pytestmark = pytest.mark.testbed

UNDER_LOAD = (
    "index, name, uuid, pci.bus_id, memory.used [MiB], memory.total [MiB], "
    "utilization.gpu [%], temperature.gpu, power.draw [W], power.limit [W], "
    "clocks.current.sm [MHz], clocks_event_reasons.active, "
    "ecc.errors.uncorrected.volatile.total\n"
    "0, NVIDIA H100 80GB HBM3, GPU-8773e22d-9771-f93a-b202-0adbc0199299, 00000000:00:06.0, "
    "20049, 81559, 100, 51, 688.11, 700.00, 1410, 0x0000000000000004, 0\n"
)
"""Our query as the H100 of tests/fixtures/gpu (driver 580.159.04) answers it under load
(`--format=csv,nounits`: units in the header only): the load capture's readings, the name,
address and power limit of the same card's idle capture."""

BASELINE_FLAGS = {
    "budget": 8,
    "topk": 4,
    "cuda_graph": True,
    "nvls": False,
    "max_running": 32,
    "window": 4096,
}


def status(
    bed: Testbed, capsys: pytest.CaptureFixture[str], *hosts: str
) -> tuple[int, dict[str, Any]]:
    code = main(["status", "--profiles", str(bed.profiles_dir), "--json", *hosts])
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    return code, {r["host"]: r for r in records}


def truth(host: Host) -> dict[str, str]:
    return host.show(UNIT, "ActiveState", "SubState", "InvocationID", "NRestarts")


def test_status_reports_each_real_unit_and_its_flags(
    bed: Testbed, capsys: pytest.CaptureFixture[str]
) -> None:
    code, records = status(bed, capsys)
    assert code == 0
    assert set(records) == {h.name for h in bed.hosts}
    for host in bed.hosts:
        record, real = records[host.name], truth(host)
        assert record["connection"] == "connected"
        assert record["active_state"] == real["ActiveState"] == "active"
        assert record["sub_state"] == real["SubState"] == "running"
        assert record["invocation_id"] == real["InvocationID"]
        assert record["n_restarts"] == int(real["NRestarts"])
        assert record["flags"] == BASELINE_FLAGS


def test_status_follows_hand_made_changes_on_the_host(
    bed: Testbed, capsys: pytest.CaptureFixture[str]
) -> None:
    """An operator's own drop-in (not ours) and a stopped unit, as systemd reports them."""
    host = bed.hosts[0]
    argv = host.run("systemctl", "show", "-p", "ExecStart", "--value", UNIT).stdout
    assert SIM_PYTHON in argv
    dropin = host.directory / "etc-systemd" / "system" / f"{UNIT}.d" / "override.conf"
    dropin.parent.mkdir()
    dropin.write_text(
        "[Service]\n"
        "Environment=SGLANG_DDTREE_MAX_TOPK=2\n"
        "ExecStart=\n"
        f"ExecStart={SIM_PYTHON} -m sglang.launch_server --model-path /models/Kimi-K2.6 \\\n"
        "    --tp 8 --host 127.0.0.1 --port 30001 --speculative-num-draft-tokens 4 \\\n"
        "    --disable-cuda-graph --max-running-requests 16\n"
    )
    host.run("systemctl", "daemon-reload")
    host.run("systemctl", "stop", UNIT)

    code, records = status(bed, capsys, host.name)
    assert code == 0
    record = records[host.name]
    assert (record["active_state"], record["sub_state"]) == ("inactive", "dead")
    assert record["flags"] == {
        "budget": 4,
        "topk": 2,
        "cuda_graph": False,
        "nvls": False,
        "max_running": 16,
        "window": None,
    }


def test_status_of_an_unreachable_host_exits_3(
    bed: Testbed, capsys: pytest.CaptureFixture[str]
) -> None:
    host = bed.hosts[-1]
    host.link_down()
    try:
        code, records = status(bed, capsys)
    finally:
        host.link_up()
    assert code == EXIT_UNREACHABLE
    assert records[host.name]["connected"] is False
    assert records[host.name]["connection"] == "unreachable"
    others = [h for h in bed.hosts if h is not host]
    assert all(records[h.name]["connected"] for h in others)


def test_gpus_by_the_profiles_program_and_the_kernel_log_through_real_sshd(
    bed: Testbed, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Issue 33 over OpenSSH: one host's `[gpu] command` answers as the captured H100 under
    load, the other has no nvidia-smi (the real shell's exit 127: `no GPU tool`, not an error,
    exit 0); `journalctl --dmesg` as we call it runs on systemd 252, from the start and after
    a cursor."""
    with_gpu, without = bed.hosts[0], bed.hosts[1]
    tool = with_gpu.directory / "root" / "nvidia-smi"
    tool.write_text(f"#!/bin/sh\ncat <<'EOF'\n{UNDER_LOAD}EOF\n")
    tool.chmod(0o755)
    profiles = tmp_path / "profiles"
    shutil.copytree(bed.profiles_dir, profiles)
    mine = profiles / f"{with_gpu.name}.toml"
    mine.write_text(mine.read_text() + '\n[gpu]\ncommand = ["/root/nvidia-smi"]\n')
    try:
        assert main(["status", "--json", "--profiles", str(profiles)]) == 0
        records = {r["host"]: r for r in map(json.loads, capsys.readouterr().out.splitlines())}
        (gpu,) = records[with_gpu.name]["gpus"]
        assert (gpu["index"], gpu["name"]) == (0, "NVIDIA H100 80GB HBM3")
        assert (gpu["memory_used_mib"], gpu["memory_total_mib"]) == (20049, 81559)
        assert (gpu["util_pct"], gpu["power_w"], gpu["power_limit_w"]) == (100, 688.11, 700)
        assert gpu["clock_events"] == ["sw_power_cap"] and gpu["sm_clock_mhz"] == 1410
        assert records[without.name]["gpus"] == []
        assert records[without.name]["gpu_problem"].startswith("no GPU tool")
        assert records[with_gpu.name]["xids"] == records[without.name]["xids"] == []
    finally:
        tool.unlink()
    first = with_gpu.run(*remote.kernel_log(None, 600).argv)  # what read_xids sends
    (last,) = with_gpu.journal(UNIT, "-n", "1")
    after = with_gpu.run(*remote.kernel_log(str(last["__CURSOR"]), 600).argv)
    assert first.returncode == after.returncode == 0
    assert all("MESSAGE" in json.loads(line) for line in first.stdout.splitlines())
