"""`/health` through the SSH connection: one word per answer, asked only where it is seen."""

from __future__ import annotations

import asyncio
import itertools
import time

from console.fleet.fleet import Fleet
from console.hosts.events import Event, HealthChecked
from console.hosts.profiles import Profile
from console.sim.fleet import SimFleet
from console.transport.ssh import ConnState, HostSession
from console.watch.health import probe_health
from tests import pace


async def until(predicate: object, timeout: float = 10.0) -> None:
    deadline = pace.deadline(timeout)
    while not predicate():  # type: ignore[operator]
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(0.05)


async def test_probe_names_ok_503_and_closed(sim: SimFleet, profiles: list[Profile]) -> None:
    host = sim.hosts["b300"]
    session = HostSession(profiles[0])
    session.start()
    try:
        assert await session.wait_connected(5)
        await until(lambda: host.unit.server is not None and host.unit.server.ready)
        assert await probe_health(session) == "ok"
        assert host.unit.server is not None
        host.unit.server.unhealthy = True
        assert await probe_health(session) == "503"
        await host.unit.stop()
        assert await probe_health(session) == "closed"
    finally:
        await session.close()


async def test_health_is_polled_for_watched_hosts_only(
    sim: SimFleet, profiles: list[Profile]
) -> None:
    events: list[Event] = []
    fleet = Fleet(profiles, follow=False, health_s=0.2)
    fleet.watched = {"b300"}.__contains__  # pro6000 scrolled off screen
    fleet.listen(events.append)
    fleet.start()
    try:
        await until(lambda: fleet.health.get("b300") == "ok")
        await asyncio.sleep(1.0)
        assert "pro6000" not in fleet.health
        fleet.watched = {"b300", "pro6000"}.__contains__  # scrolled back on screen
        fleet.on_screen(["b300", "pro6000"])
        await until(lambda: fleet.health.get("pro6000") == "ok")
        checked = [e for e in events if isinstance(e, HealthChecked)]
        for name in ("b300", "pro6000"):
            said = [e.health for e in checked if e.host == name]
            assert said[-1] == "ok"
            assert all(a != b for a, b in itertools.pairwise(said))  # changes only
    finally:
        await fleet.stop()


async def test_a_row_coming_on_screen_has_its_health_read_at_once(
    sim: SimFleet, profiles: list[Profile]
) -> None:
    # A long poll interval: without the wake pro6000 would wait up to 30 s, showing the
    # answer it gave when it was last on screen (minutes old, or a 503 from its start-up).
    for host in sim.hosts.values():  # both servers up: every answer is "ok"
        await until(lambda h=host: h.unit.server is not None and h.unit.server.ready)
    fleet = Fleet(profiles, follow=False, health_s=30)
    fleet.watched = {"b300"}.__contains__
    fleet.start()
    try:
        fleet.on_screen(["b300"])
        await until(lambda: fleet.health.get("b300") == "ok")
        await asyncio.sleep(0.5)
        assert "pro6000" not in fleet.health
        fleet.watched = {"b300", "pro6000"}.__contains__  # scrolled: both rows on screen
        fleet.on_screen(["b300", "pro6000"])
        await until(lambda: fleet.health.get("pro6000") == "ok", timeout=5)
    finally:
        await fleet.stop()


async def test_a_partition_reads_as_reconnecting_in_seconds_not_a_minute(
    sim: SimFleet, profiles: list[Profile]
) -> None:
    """The second operator run (issue 30): during a partition the row said `connected` for
    ~60 s, until the keepalives (15 s × 3) gave up. A health probe that gets no channel, then a
    cheap read that gets no answer, make a new connection now; the host comes back when the
    link does."""
    profile = profiles[0]
    slow = profile.model_copy(
        update={"ssh": profile.ssh.model_copy(update={"keepalive_interval_s": 60.0})}
    )
    host = sim.hosts[profile.name]
    fleet = Fleet([slow], follow=False, health_s=0.5)
    fleet.start()
    session = fleet.sessions[profile.name]
    try:
        assert await session.wait_connected(10)
        host.freeze()
        await until(lambda: session.state.state is not ConnState.CONNECTED, timeout=15)
        host.thaw()
        assert await session.wait_connected(pace.bound(15))
    finally:
        host.thaw()
        await fleet.stop()
