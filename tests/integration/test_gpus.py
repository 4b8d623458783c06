"""The GPUs and the driver's Xid errors through real SSH sessions (issue 33): a budget that
dies in CUDA-graph capture leaves Xid 31 on GPU 0 in the simulated host's kernel log (as the
real H200 logged it, tests/fixtures/gpu); `status` names it; the fleet reads it at once when
the crash is seen, on screen or not."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest

from console.cli import main
from console.fleet.fleet import Fleet
from console.hosts.profiles import load_fleet
from console.local.audit import AuditLog
from console.sim.fleet import SimFleet, ThreadedSimFleet
from console.sim.gpus import xid_line
from console.sim.sglang import Timing
from console.transport.host_files import STATE_ROOT
from console.tuning.history import history_path
from console.watch.gpu_reader import GpuReading
from tests import pace
from tests.stand_ins import FakeClock

UNIT = "sglang-k26-ddtree.service"
ILLEGAL = (
    "[2026-12-07 12:01:07 TP0] Scheduler hit an exception: torch.AcceleratorError: "
    "CUDA error: an illegal memory access was encountered"
)


def test_a_capture_crash_leaves_its_xid_and_status_names_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fleet = SimFleet(
        tmp_path / "sim", hosts=1, timing=Timing(load_s=0.3, decode_interval_s=0.1), gpus=4
    )
    sim = ThreadedSimFleet(fleet)
    sim.start()
    try:
        profiles = str(fleet.profiles_dir)
        assert main(["set", "b300", "budget=16", "--yes", "--profiles", profiles]) == 1
        said = capsys.readouterr().out  # rolled back: the crash in capture
        assert "b300: Xid 31 on GPU 0 at " in said and "illegal memory access" in said
        # The crash's history entry keeps its Xid and the GPUs as they were just after.
        history = fleet.hosts["b300"].local(history_path(UNIT, STATE_ROOT))
        entry = json.loads(history.read_text())["entries"][-1]
        assert entry["outcome"] == "rolled_back" and entry["signature"] == "illegal_memory_access"
        (xid_text,) = entry["xids"]
        assert xid_text.startswith("Xid 31 on GPU 0 at ") and "(python3, pid " in xid_text
        assert [g["index"] for g in entry["gpus_at_crash"]] == [0, 1, 2, 3]
        assert entry["gpus_at_ready"] == []  # it died in capture: never ready
        assert main(["status", "b300", "--json", "--profiles", profiles]) == 0
        record = json.loads(capsys.readouterr().out)
        (xid,) = record["xids"]
        assert (xid["code"], xid["gpu"], xid["process"]) == (31, 0, "python3")
        assert xid["hardware"] is False  # a kernel's fault: a configuration can avoid it
        assert xid["pci"] == "0000:00:06" and "illegal memory access" in xid["meaning"]
        assert abs(xid["time"] - time.time()) < 120
        assert [g["pci"] for g in record["gpus"]][:2] == ["00000000:00:06.0", "00000000:00:07.0"]
        assert main(["status", "b300", "--profiles", profiles]) == 0
        shown = capsys.readouterr().out
        assert "b300: Xid 31 on GPU 0 at " in shown and "(python3, pid " in shown
        # The change's own reads are in the audit log (one of each, at the crash); status's
        # are not: reads that change nothing, run every poll in the TUI.
        audit = [r.command for r in AuditLog().read()]
        ran = fleet.hosts["b300"].commands
        for word in ("nvidia-smi", "--dmesg"):
            assert sum(word in c for c in audit) == 1 and sum(word in c for c in ran) == 3

        # The snapshot keeps them beside the excerpt, in the manifest.
        package = tmp_path / "pkg"
        assert main(["snapshot", "b300", "--package", str(package), "--profiles", profiles]) == 0
        kept = json.loads((package / "b300_logs" / "gpus.json").read_text())
        assert len(kept["gpus"]) == 4 and kept["xids"][0]["code"] == 31
        (meta,) = (package / "snapshots").glob("b300-*.json")
        assert json.loads(meta.read_text())["gpus"] == "b300_logs/gpus.json"
        assert "b300_logs/gpus.json" in (package / "MANIFEST.sha256").read_text()
    finally:
        sim.stop()


async def test_a_crash_reads_the_xid_at_once_for_a_host_off_screen(tmp_path: Path) -> None:
    fleet = SimFleet(tmp_path / "sim", hosts=1, timing=Timing(load_s=0.1, decode_interval_s=5))
    await fleet.start()
    host = fleet.hosts["b300"]
    host.gpus = ["NVIDIA H100 80GB HBM3"] * 2
    watcher = Fleet(load_fleet(fleet.profiles_dir), health_s=0)
    watcher.watched = lambda name: False  # no row on screen: no GPU poll of its own
    readings: list[GpuReading] = []
    watcher.on_gpus = readings.append
    watcher.start()
    try:
        deadline = pace.deadline(15)
        while watcher.followers["b300"].restarts < 1:  # following
            assert time.monotonic() < deadline
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.3)
        assert readings == []  # off screen: not read
        host.journal.kernel(xid_line(1, 4242))
        host.journal.append(UNIT, ILLEGAL)
        while not readings:
            assert time.monotonic() < deadline, "the crash did not wake the GPU read"
            await asyncio.sleep(0.05)
        (xid,) = readings[0].xids
        assert (xid.xid.code, xid.gpu, xid.xid.pid) == (31, 1, 4242)
        assert [g.index for g in readings[0].gpus] == [0, 1]
    finally:
        await watcher.stop()
        await fleet.stop()


async def test_a_hung_nvidia_smi_times_out_and_the_poll_goes_on(tmp_path: Path) -> None:
    """A GPU off the bus hangs the driver's tools: the read gives up after `[gpu] timeout_s`,
    says so, and the next poll reads again, a GPU fewer."""
    fleet = SimFleet(tmp_path / "sim", hosts=1, timing=Timing(load_s=0.1, decode_interval_s=5))
    await fleet.start()
    host = fleet.hosts["b300"]
    host.gpus = ["NVIDIA H100 80GB HBM3"] * 2
    profile = fleet.profiles_dir / "b300.toml"
    profile.write_text(profile.read_text() + "\n[gpu]\ntimeout_s = 0.5\ninterval_s = 5\n")
    clock = FakeClock()
    watcher = Fleet(load_fleet(fleet.profiles_dir), health_s=0, clock=clock)
    readings: list[GpuReading] = []
    watcher.on_gpus = readings.append
    watcher.start()

    async def next_reading() -> GpuReading:
        seen = len(readings)
        deadline = pace.deadline(15)
        while len(readings) == seen:
            assert time.monotonic() < deadline, "no reading"
            clock.advance(5)  # the poll's interval on the fleet's clock
            await asyncio.sleep(0.05)
        return readings[-1]

    try:
        first = await next_reading()
        assert [g.index for g in first.gpus] == [0, 1] and first.problem is None
        host.gpu_hang = True
        hung = await next_reading()
        assert hung.gpus == () and "timed out after 0.5s" in (hung.problem or "")
        host.gpu_hang = False
        host.gpus = host.gpus[:1]  # GPU 1 is gone from the bus
        after = await next_reading()
        assert [g.index for g in after.gpus] == [0] and after.problem is None
    finally:
        await watcher.stop()
        await fleet.stop()
