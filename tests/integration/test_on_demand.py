"""On-demand connections over 32 simulated hosts, through the real client: only the wanted
hosts connect, released ones close after idle_close_s and show `idle`, and reopening reads
back every line logged while idle exactly once (a crash among them is an alert, never a
probation rollback); a host on probation is never closed."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from console.fleet.fleet import Fleet
from console.hosts.events import CrashDetected, Event, JournalBatch
from console.hosts.profiles import load_fleet
from console.sim.fleet import SimFleet
from console.sim.sglang import Timing
from console.transport.host_files import STATE_ROOT
from console.transport.ssh import ConnState
from console.tuning.history import history_path
from console.tuning.probation import ProbationAnnounced, ProbationEvent
from console.watch.journal import read_back_marker
from tests import pace
from tests.stand_ins import FakeClock, PlannedOnlyGuard

HOSTS = 32
IDLE_S = 0.5
UNIT = "sglang-k26-ddtree.service"
ILLEGAL = (
    "[2026-01-01 00:00:00 TP0] Scheduler hit an exception: torch.AcceleratorError: "
    "CUDA error: an illegal memory access was encountered"
)


@pytest.fixture
async def sim(tmp_path: Path) -> AsyncIterator[SimFleet]:
    # Quiet hosts (a decode line an hour): every line the test counts is its own.
    fleet = SimFleet(
        tmp_path / "sim", hosts=HOSTS, timing=Timing(load_s=0.3, decode_interval_s=3600)
    )
    await fleet.start()
    yield fleet
    await asyncio.wait_for(fleet.stop(), 10)


async def until(predicate: Callable[[], object], timeout: float = 20.0) -> None:
    deadline = pace.deadline(timeout)
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.02)


def connected_to(sim: SimFleet) -> set[str]:
    """The simulated hosts holding an SSH connection now, as the hosts count them."""
    return {name for name, host in sim.hosts.items() if host.connections}


def state(fleet: Fleet, name: str) -> ConnState:
    return fleet.sessions[name].state.state


def on_demand(sim: SimFleet, clock: FakeClock) -> Fleet:
    """The fleet on demand, its idle close timed by `clock` (advanced by the test)."""
    return Fleet(
        load_fleet(sim.profiles_dir),
        on_demand=True,
        idle_close_s=IDLE_S,
        health_s=0.2,
        clock=clock,
    )


def once_idle_closes(clock: FakeClock, predicate: Callable[[], bool]) -> Callable[[], bool]:
    """`predicate`, checked after moving `clock` past idle_close_s (at each look: a host
    released meanwhile has its close due too)."""

    def check() -> bool:
        clock.advance(IDLE_S)
        return predicate()

    return check


async def test_only_wanted_hosts_connect_and_released_ones_go_idle(sim: SimFleet) -> None:
    clock = FakeClock()
    fleet = on_demand(sim, clock)
    names = list(fleet.profiles)
    fleet.start()
    try:
        assert all(state(fleet, n) is ConnState.IDLE for n in names)
        page = names[:10]
        fleet.on_screen(page)
        fleet.select(names[20])
        wanted = {*page, names[20]}
        await until(lambda: all(state(fleet, n) is ConnState.CONNECTED for n in wanted))
        await until(lambda: all(fleet.status.get(n) for n in wanted))  # their units read
        await asyncio.sleep(IDLE_S)  # polls and followers of the others had time to open them
        assert connected_to(sim) == wanted
        assert all(state(fleet, n) is ConnState.IDLE for n in names if n not in wanted)

        fleet.on_screen(names[10:20])  # page down
        fleet.select(names[10])
        released = (*page, names[20])

        def paged() -> bool:  # the released closed, the new page open, as both sides see it
            idle = all(state(fleet, n) is ConnState.IDLE for n in released)
            opened = all(state(fleet, n) is ConnState.CONNECTED for n in names[10:20])
            return idle and opened and connected_to(sim) == set(names[10:20])

        await until(once_idle_closes(clock, paged))
        assert not any(fleet.status[n].error for n in page)  # closing is not a unit error
    finally:
        await fleet.stop()


async def test_back_on_screen_before_idle_close_keeps_the_connection(sim: SimFleet) -> None:
    fleet = Fleet(load_fleet(sim.profiles_dir), on_demand=True, idle_close_s=30, health_s=0)
    name = next(iter(fleet.profiles))
    fleet.start()
    try:
        fleet.on_screen([name])
        await until(lambda: state(fleet, name) is ConnState.CONNECTED)
        first = next(iter(sim.hosts[name].connections))
        for _ in range(5):  # scrolled past and back
            fleet.on_screen([])
            await asyncio.sleep(0.05)
            fleet.on_screen([name])
        await asyncio.sleep(0.2)
        assert sim.hosts[name].connections == {first}  # the same connection throughout
    finally:
        await fleet.stop()


def numbered(n: int) -> str:
    return f"[2026-01-01 00:00:00 TP0] idle-test line {n}"


async def test_reopened_host_reads_back_every_idle_line_once_and_a_crash_is_an_alert(
    sim: SimFleet,
) -> None:
    clock = FakeClock()
    fleet = on_demand(sim, clock)
    name = list(fleet.profiles)[3]
    host = sim.hosts[name]
    batches: list[JournalBatch] = []
    crashes: list[CrashDetected] = []
    announced: list[ProbationEvent] = []

    guard = PlannedOnlyGuard(
        fleet.sessions, announced.append, countdown_s=0, on_window=fleet.probation
    )
    busy_on_crash: list[bool] = []

    def listen(event: Event) -> None:
        guard.observe(event)
        if isinstance(event, JournalBatch) and event.host == name:
            batches.append(event)
        elif isinstance(event, CrashDetected) and event.host == name:
            crashes.append(event)
            busy_on_crash.append(name in guard._busy)  # the guard took it up, or left it

    fleet.listen(listen)
    fleet.start()

    def lines(read_back: bool | None = None) -> list[str]:
        return [
            line
            for batch in batches
            if read_back is None or batch.read_back == read_back
            for record in batch.entries
            for line in record.lines
            if "idle-test" in line or "illegal" in line
        ]

    try:
        fleet.on_screen([name])
        await until(lambda: state(fleet, name) is ConnState.CONNECTED)
        await until(lambda: fleet.followers[name].restarts >= 1)
        for n in range(1, 21):
            host.journal.append(UNIT, numbered(n))
        await until(lambda: len(lines()) == 20)

        fleet.on_screen([])
        await asyncio.sleep(IDLE_S)  # the rest of its start-up lines arrive live meanwhile
        await until(once_idle_closes(clock, lambda: state(fleet, name) is ConnState.IDLE))
        # The host sees the close when its side of the connection ends, a moment after ours.
        await until(lambda: not host.connections)
        # Another console keeps a change while this one has the host idle: on probation now.
        kept = {"n": 1, "kind": "change", "outcome": "kept", "values": {"budget": 8}}
        kept |= {"argv": [], "environment": {}, "dropin": None, "finished_at": time.time()}
        history = host.local(history_path(UNIT, STATE_ROOT))
        history.parent.mkdir(parents=True, exist_ok=True)
        history.write_text(json.dumps({"version": 1, "entries": [kept]}))
        for n in range(21, 121):
            host.journal.append(UNIT, numbered(n))
            if n == 60:
                host.journal.append(UNIT, ILLEGAL)

        fleet.on_screen([name])  # wanted again
        expected = [numbered(n) for n in range(1, 121)]
        expected.insert(60, ILLEGAL)
        await until(lambda: len(lines()) >= len(expected))
        await until(lambda: crashes)
        await asyncio.sleep(0.3)  # anything doubled would arrive now
        assert lines() == expected  # every line once, in order
        assert lines(read_back=True) == expected[20:]  # the idle ones, marked as read back
        last = [r for b in batches if b.read_back for r in b.entries][-1]
        assert last.read_back == 101 and read_back_marker(101).startswith("── read back 101")
        crash = crashes[0]
        assert crash.signature == "illegal_memory_access" and crash.read_back and not crash.live
        assert crash.timestamp < time.time()
        assert busy_on_crash == [False]  # left an alert: no probation handling started
        assert not [e for e in announced if isinstance(e, ProbationAnnounced)]
        assert guard.plans == []  # a read-back crash is never rolled back
    finally:
        await guard.stop()
        await fleet.stop()


async def test_a_host_on_probation_is_never_closed_and_its_crash_is_acted_on(
    sim: SimFleet,
) -> None:
    clock = FakeClock()
    fleet = on_demand(sim, clock)
    name = list(fleet.profiles)[5]
    host = sim.hosts[name]
    kept = {"n": 1, "kind": "change", "outcome": "kept", "values": {"budget": 8}}
    kept |= {"argv": [], "environment": {}, "dropin": None, "finished_at": time.time()}
    history = host.local(history_path(UNIT, STATE_ROOT))
    history.parent.mkdir(parents=True, exist_ok=True)
    history.write_text(json.dumps({"version": 1, "entries": [kept]}))
    announced: list[ProbationEvent] = []

    guard = PlannedOnlyGuard(
        fleet.sessions, announced.append, countdown_s=0, on_window=fleet.probation
    )
    fleet.listen(guard.observe)
    fleet.start()
    try:
        fleet.on_screen([name])
        await until(lambda: guard.state(name) is not None)  # its history read on connecting
        fleet.on_screen([])
        clock.advance(4 * IDLE_S)  # long past idle_close_s
        await asyncio.sleep(0.2)  # a close, were one due, would have run
        assert state(fleet, name) is ConnState.CONNECTED and host.connections
        host.journal.append(UNIT, ILLEGAL)
        await until(lambda: any(isinstance(e, ProbationAnnounced) for e in announced))
    finally:
        await guard.stop()
        await fleet.stop()
