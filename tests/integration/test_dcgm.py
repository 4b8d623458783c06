"""dcgm-exporter's series through a real Prometheus (Debian's package) stand in for
nvidia-smi over SSH (issue 33): the simulated hosts serve the exporter's page, Prometheus
scrapes it, and the fleet's GPU readings from it match what nvidia-smi answers over SSH, with
the Xid the exporter reports once."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

from console.fleet.fleet import Fleet
from console.hosts.profiles import Profile
from console.sim.fleet import REFERENCE_GPU, SimFleet
from console.sim.loopback import serve_dcgm_on_loopback
from console.transport.prometheus import query_range
from console.watch.dcgm import gpus_from_prometheus
from console.watch.gpu_reader import GpuReading, read_gpus
from tests.integration.test_prometheus import DASHBOARD, PROMETHEUS_BIN, start_prometheus
from tests.tools import needs

pytestmark = needs(PROMETHEUS_BIN, "prometheus", "apt-get install prometheus")


async def test_the_fleets_gpus_from_dcgm_exporter_through_prometheus(
    sim: SimFleet, profiles: list[Profile], tmp_path: Path
) -> None:
    assert PROMETHEUS_BIN is not None
    b300 = sim.hosts["b300"]
    b300.gpus = [REFERENCE_GPU] * 2  # pro6000: no NVIDIA GPUs, no exporter series
    servers = [await serve_dcgm_on_loopback(sim.hosts[p.name]) for p in profiles]
    targets = "".join(f"'127.0.0.1:{s.sockets[0].getsockname()[1]}', " for s in servers)
    proc, url = await start_prometheus(tmp_path, "dcgm", f"      - targets: [{targets}]\n")
    fleet: Fleet | None = None
    try:
        for _ in range(300):  # ready, and the exporter scraped
            await asyncio.sleep(0.1)
            assert proc.returncode is None, (tmp_path / "prometheus.log").read_text()[-2000:]
            try:
                readings = await gpus_from_prometheus(url, profiles)
            except Exception:  # not listening yet
                continue
            if "b300" in readings and b300.unit.server is not None and b300.unit.server.ready:
                break
        else:
            raise AssertionError("Prometheus never held b300's GPUs")
        assert set(readings) == {"b300"}
        fleet = Fleet(profiles, prometheus_url=url, server_metrics_s=0.5, health_s=0)
        seen: list[GpuReading] = []
        fleet.on_gpus = seen.append
        fleet.start()
        await fleet.sessions["b300"].wait_settled(10)
        over_ssh = await read_gpus(fleet.sessions["b300"], profiles[0].gpu, 0.0)
        for _ in range(100):  # the same readings as nvidia-smi's, once Prometheus has them
            await asyncio.sleep(0.1)
            if seen and seen[-1].gpus and seen[-1].gpus[0].util_pct == 100:
                break
        via = seen[-1].gpus
        assert [g.index for g in via] == [0, 1] and via[0].name == REFERENCE_GPU
        for a, b in zip(via, over_ssh.gpus, strict=True):
            assert (a.memory_used_mib, a.util_pct, a.power_w) == (
                b.memory_used_mib,
                b.util_pct,
                b.power_w,
            )
            assert a.pci == b.pci and a.memory_total_mib == (b.memory_total_mib or 0) - 480
        assert not any(r.xids for r in seen)

        b300.unit.xids[0] = 31  # the driver's Xid, as the exporter reports it
        for _ in range(100):
            await asyncio.sleep(0.1)
            if any(r.xids for r in seen):
                break
        (xid,) = [x for r in seen for x in r.xids]
        assert (xid.xid.code, xid.gpu, xid.xid.pci) == (31, 0, "00000000:00:06.0")
        await asyncio.sleep(1.5)  # later rounds still hold it in their window: said once
        assert len([x for r in seen for x in r.xids]) == 1

        # The shipped dashboard's GPU panels have data, and the rule fires on the new Xid.
        now = time.time()
        for panel in json.loads(DASHBOARD.read_text())["panels"]:
            for target in panel["targets"]:
                if "DCGM_" in target["expr"]:
                    expr = target["expr"].replace('=~"$hostname"', '=~".*"')
                    assert await query_range(url, expr, start=now - 5, end=now, step=1), expr
        for _ in range(100):
            alerts = await query_range(
                url,
                'ALERTS{alertname="GpuXidError"}',
                start=time.time() - 2,
                end=time.time(),
                step=1,
            )
            if alerts:
                break
            await asyncio.sleep(0.1)
        (alert,) = alerts
        assert (alert.labels["Hostname"], alert.labels["gpu"]) == ("b300", "0")
    finally:
        if fleet is not None:
            await fleet.stop()
        proc.terminate()
        await proc.wait()
        for server in servers:
            server.close()
