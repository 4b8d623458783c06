"""SGLang's /metrics through the SSH connection of a simulated host (started with
--enable-metrics): the gauges of the last batch and the accept length over a window from the
counters, beside what the journal's decode lines say."""

from __future__ import annotations

import asyncio

import pytest

from console.fleet.fleet import Fleet
from console.hosts.profiles import Profile
from console.sim.fleet import SimFleet
from console.transport.ssh import HostSession
from console.watch.server_metrics import MetricsUnavailable, read_server_metrics
from console.watch.sources import SERVER, from_server
from tests.integration.support import first_numbers

ACCEPT_RANGE = (4.25, 4.55)
"""The simulated server at budget 8 with CUDA graphs draws 4.3–4.5 (console/sim/sglang.py);
/metrics gives it as a ratio of whole-token counters, which a fresh clone's run saw at
4.5046."""


async def ready(sim: SimFleet, name: str) -> None:
    for _ in range(100):
        server = sim.hosts[name].unit.server
        if server is not None and server.ready and server._accept_n >= 2:
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"{name}: the simulated server never decoded")


async def test_numbers_from_the_servers_own_page(sim: SimFleet, profiles: list[Profile]) -> None:
    profile = profiles[0]
    await ready(sim, profile.name)
    session = HostSession(profile)
    session.start()
    try:
        await session.wait_connected(10)
        numbers = await from_server(session, profile, 1.0)
    finally:
        await session.close()
    assert numbers.source == SERVER == "/metrics"
    low, high = ACCEPT_RANGE
    assert numbers.accept_len is not None and low <= numbers.accept_len <= high
    assert numbers.accept_len_window is not None and low <= numbers.accept_len_window <= high
    assert numbers.window_s == pytest.approx(1.0, abs=0.5)
    assert numbers.cuda_graph is True
    assert numbers.gen_throughput is not None and 1000 < numbers.gen_throughput < 2000
    assert numbers.running is not None and numbers.running >= 1
    server = sim.hosts[profile.name].unit.server
    assert server is not None
    # the KV cache as the page has it (issue 41): the last batch's share and tokens
    assert numbers.token_usage is not None and 0 < numbers.token_usage < 1
    assert numbers.used_tokens is not None and numbers.used_tokens >= 1
    assert numbers.cache_hit_rate == 0.0
    # the counters agree with the run's own mean of the decode lines' accept lengths
    assert numbers.accept_len_window == pytest.approx(
        server._accept_sum / server._accept_n, abs=0.1
    )


async def test_a_server_without_enable_metrics_says_so(
    sim: SimFleet, profiles: list[Profile]
) -> None:
    profile = profiles[0]
    await ready(sim, profile.name)
    server = sim.hosts[profile.name].unit.server
    assert server is not None and server.config is not None
    server.config.args.enable_metrics = False
    session = HostSession(profile)
    session.start()
    try:
        await session.wait_connected(10)
        with pytest.raises(MetricsUnavailable, match="--enable-metrics"):
            await read_server_metrics(session, profile.service.port)
    finally:
        await session.close()


async def test_the_fleet_reads_every_servers_page_without_a_journal(
    sim: SimFleet, profiles: list[Profile]
) -> None:
    """No journal followed at all: the numbers still come, each saying it is from /metrics."""
    for p in profiles:
        await ready(sim, p.name)
    fleet = Fleet(profiles, follow=False, server_metrics_s=0.3)
    seen = await first_numbers(fleet)
    assert set(seen) == {p.name for p in profiles}
    low, high = ACCEPT_RANGE
    for event in seen.values():
        assert event.source == "/metrics"
        assert low <= event.values["accept_len"] <= high
        assert event.graph is True
