"""The fleet: all hosts at once, a dead host delays nobody, status follows the unit."""

from __future__ import annotations

import asyncio
import time

from console.fleet.fleet import Fleet
from console.hosts.events import Event, HostStateChanged, JournalBatch, ServiceStatus
from console.hosts.profiles import Profile
from console.sim.fleet import SimFleet
from console.transport.ssh import ConnState
from tests import pace


async def wait_for(events: list[Event], predicate, timeout: float = 10.0) -> Event:  # type: ignore[no-untyped-def]
    deadline = pace.deadline(timeout)
    while time.monotonic() < deadline:
        for event in events:
            if predicate(event):
                return event
        await asyncio.sleep(0.02)
    raise AssertionError("event not seen in time")


async def test_a_dead_host_never_delays_the_others(sim: SimFleet, profiles: list[Profile]) -> None:
    dead, alive = profiles
    await sim.hosts[dead.name].go_offline()
    events: list[Event] = []
    fleet = Fleet(profiles)
    fleet.listen(events.append)
    started = time.monotonic()
    fleet.start()
    status = await wait_for(
        events, lambda e: isinstance(e, ServiceStatus) and e.host == alive.name and not e.error
    )
    assert isinstance(status, ServiceStatus)
    assert status.active_state == "active" and status.flags["budget"] == 8
    await wait_for(events, lambda e: isinstance(e, JournalBatch) and e.host == alive.name)
    assert time.monotonic() - started < 5
    unreachable = await wait_for(
        events,
        lambda e: (
            isinstance(e, HostStateChanged)
            and e.host == dead.name
            and e.state.state is ConnState.UNREACHABLE
        ),
    )
    assert unreachable.state.retry_s is not None  # type: ignore[union-attr]
    await fleet.stop()


async def test_status_follows_a_restart_without_waiting_for_the_poll(
    sim: SimFleet, profiles: list[Profile]
) -> None:
    events: list[Event] = []
    fleet = Fleet(profiles[:1], poll_s=3600)
    fleet.listen(events.append)
    fleet.start()
    first = await wait_for(events, lambda e: isinstance(e, ServiceStatus) and not e.error)
    assert isinstance(first, ServiceStatus)
    await sim.hosts[profiles[0].name].unit.restart()
    second = await wait_for(
        events,
        lambda e: isinstance(e, ServiceStatus) and e.invocation_id not in ("", first.invocation_id),
    )
    assert isinstance(second, ServiceStatus) and second.active_state == "active"
    await fleet.stop()


async def test_back_pressure_pauses_reading_and_loses_nothing(
    sim: SimFleet, profiles: list[Profile]
) -> None:
    """A consumer that is behind stops the followers; the lines wait in the host's journal."""
    host = sim.hosts[profiles[0].name]
    events: list[Event] = []
    fleet = Fleet(profiles[:1], history=0)
    behind = [False]
    fleet.pressure = lambda: behind[0]
    fleet.listen(events.append)
    fleet.start()
    await fleet.sessions[profiles[0].name].wait_connected(10)
    await wait_for(events, lambda e: isinstance(e, JournalBatch))

    def numbered() -> list[int]:
        return [
            int(entry.message.rsplit("n=", 1)[1])
            for e in events
            if isinstance(e, JournalBatch)
            for entry in e.entries
            if "bp-line n=" in entry.message
        ]

    host.journal.append("sglang-k26-ddtree.service", "[2026-12-02 10:00:00] bp-line n=0")
    await wait_for(events, lambda e: 0 in numbered())
    behind[0] = True  # the next delivered batch shuts the gate behind it
    for n in range(1, 200):
        host.journal.append("sglang-k26-ddtree.service", f"[2026-12-02 10:00:00] bp-line n={n}")
    await asyncio.sleep(0.5)
    assert max(numbered()) < 199  # paused: the rest waits on the host
    behind[0] = False
    await wait_for(events, lambda e: 199 in numbered())
    assert numbered() == list(range(200))
    await fleet.stop()
