"""A real Prometheus (Debian's package) on 127.0.0.1 scrapes simulated hosts' /metrics, and
`specops metrics --prometheus` reads the whole fleet back with one query_range per metric.

Prometheus negotiates OpenMetrics, so prometheus_client (and the simulated page) serve the
underscore names: the store holds `sglang_spec_accept_length` and no `sglang:…` at all, which
is the trap the queries must survive. The shipped rules are loaded too, and every dashboard
expression is run against the live data.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from console.fleet.fleet import Fleet
from console.hosts.profiles import Profile
from console.sim.fleet import SimFleet
from console.sim.loopback import serve_on_loopback
from console.transport.prometheus import query_range
from console.watch.sources import PROMETHEUS, from_prometheus
from tests.integration.support import first_numbers
from tests.tools import needs

PROMETHEUS_BIN = shutil.which("prometheus")
REPO = Path(__file__).resolve().parents[2]
RULES = REPO / "monitoring" / "prometheus" / "specops-rules.yml"
DASHBOARD = REPO / "monitoring" / "grafana" / "specops-speculative-decoding.json"

pytestmark = needs(PROMETHEUS_BIN, "prometheus", "apt-get install prometheus")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


async def start_prometheus(
    tmp_path: Path, job: str, static_configs: str
) -> tuple[asyncio.subprocess.Process, str]:
    """Debian's Prometheus on a free 127.0.0.1 port, scraping `static_configs` (YAML list
    items) every second as `job`, with the shipped rules loaded; its log in tmp_path."""
    assert PROMETHEUS_BIN is not None
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n"
        f"rule_files: ['{RULES}']\n"
        f"scrape_configs:\n  - job_name: {job}\n    static_configs:\n{static_configs}"
    )
    port = free_port()
    proc = await asyncio.create_subprocess_exec(
        PROMETHEUS_BIN,
        f"--config.file={config}",
        f"--storage.tsdb.path={tmp_path / 'data'}",
        f"--web.listen-address=127.0.0.1:{port}",
        stdout=asyncio.subprocess.DEVNULL,
        stderr=(tmp_path / "prometheus.log").open("wb"),
    )
    return proc, f"http://127.0.0.1:{port}"


@dataclass
class Scraped:
    url: str
    profiles: list[Profile]


@pytest.fixture
async def scraped(sim: SimFleet, profiles: list[Profile], tmp_path: Path) -> AsyncIterator[Scraped]:
    """Prometheus scraping each simulated host every second, `instance` named after the host."""
    assert PROMETHEUS_BIN is not None
    servers = [await serve_on_loopback(sim.hosts[p.name]) for p in profiles]
    targets = "".join(
        f"      - targets: ['127.0.0.1:{s.sockets[0].getsockname()[1]}']\n"
        f"        labels: {{instance: '{p.name}:{p.service.port}'}}\n"
        for p, s in zip(profiles, servers, strict=True)
    )
    proc, url = await start_prometheus(tmp_path, "sglang", targets)
    try:
        for _ in range(300):  # ready, and both hosts scraped at least twice
            await asyncio.sleep(0.1)
            assert proc.returncode is None, (tmp_path / "prometheus.log").read_text()[-2000:]
            try:
                numbers = await from_prometheus(url, profiles, 10.0)
            except Exception:  # not listening yet
                continue
            if len(numbers) == len(profiles) and all(n.accept_len_window for n in numbers.values()):
                break
        else:
            raise AssertionError("Prometheus never held both hosts' metrics")
        yield Scraped(url, profiles)
    finally:
        proc.terminate()
        await proc.wait()
        for server in servers:
            server.close()


async def test_specops_reads_the_fleet_back_from_prometheus(
    scraped: Scraped, sim: SimFleet, tmp_path: Path
) -> None:
    cli = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "console",
        "metrics",
        "--profiles",
        str(sim.profiles_dir),
        "--prometheus",
        scraped.url,
        "--window",
        "30",
        "--json",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    stdout, stderr = await asyncio.wait_for(cli.communicate(), 60)
    assert cli.returncode == 0, stderr.decode()
    records = [json.loads(line) for line in stdout.decode().splitlines()]
    assert [r["host"] for r in records] == [p.name for p in scraped.profiles]
    for record in records:
        assert record["source"] == PROMETHEUS
        assert 4.3 <= record["accept_len"] <= 4.5
        assert 4.3 <= record["accept_len_window"] <= 4.5
        assert record["cuda_graph"] is True
        assert 1000 < record["gen_throughput"] < 2000
        assert record["running"] >= 1
        server = sim.hosts[record["host"]].unit.server
        assert server is not None
        # the host's own numbers, not another host's: the last value Prometheus scraped
        assert record["accept_len_window"] == pytest.approx(
            server._accept_sum / server._accept_n, abs=0.1
        )
    # one Prometheus serves the other checks too (it takes seconds to hold two scrapes)
    await the_tui_fleet_reads_every_host_from_prometheus(scraped)
    await prometheus_holds_only_the_underscore_spelling(scraped)
    await every_dashboard_expression_runs_on_the_live_data(scraped)


async def the_tui_fleet_reads_every_host_from_prometheus(scraped: Scraped) -> None:
    """The TUI's fleet with prometheus_url: no journal, one round of queries for all hosts."""
    fleet = Fleet(scraped.profiles, follow=False, server_metrics_s=0.5, prometheus_url=scraped.url)
    seen = await first_numbers(fleet)
    assert {h: e.source for h, e in seen.items()} == {p.name: PROMETHEUS for p in scraped.profiles}
    assert all(4.3 <= e.values["accept_len"] <= 4.5 for e in seen.values())


async def prometheus_holds_only_the_underscore_spelling(scraped: Scraped) -> None:
    now = time.time()
    underscore = await query_range(
        scraped.url, "sglang_spec_accept_length", start=now - 30, end=now, step=1
    )
    colon = await query_range(
        scraped.url, '{__name__="sglang:spec_accept_length"}', start=now - 30, end=now, step=1
    )
    assert {s.labels["instance"] for s in underscore} == {
        f"{p.name}:{p.service.port}" for p in scraped.profiles
    }
    assert colon == []


async def every_dashboard_expression_runs_on_the_live_data(scraped: Scraped) -> None:
    """Every expression evaluates (a bad one raises); those over the gauges have data already
    (rates and baselines need minutes of samples; the simulated page has no histograms)."""
    data = json.loads(DASHBOARD.read_text())
    now = time.time()
    empty: list[str] = []
    for panel in data["panels"]:
        for target in panel.get("targets", ()):
            expr = (
                target["expr"]
                .replace("$__rate_interval", "1m")
                .replace('=~"$instance"', '=~".*"')
                .replace('=~"$variant"', '=~".*"')
                .replace('=~"$hostname"', '=~".*"')
            )
            series = await query_range(scraped.url, expr, start=now - 20, end=now, step=2)
            # The GPU panels read dcgm-exporter's series: tests/integration/test_dcgm.py
            # runs them where Prometheus scrapes an exporter.
            if not series and not any(
                w in expr for w in ("rate(", "resets(", "_over_time(", "node", "DCGM_")
            ):
                empty.append(f"{panel['title']}: {expr}")
    assert empty == []
