"""The journal follower through the real client against a simulated host that misbehaves."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from console.hosts.events import JournalEntry
from console.hosts.profiles import Profile
from console.sim.fleet import SimFleet
from console.sim.journal import RateLimit
from console.transport.ssh import Backoff, HostSession
from console.watch.journal import DELIVERY_SLICE, JournalFollower
from tests import pace

QUICK = Backoff(initial_s=0.02, cap_s=0.2)
UNIT = "seqtest.service"


@pytest.fixture
async def session(profiles: list[Profile]) -> AsyncIterator[HostSession]:
    """A connected session to the first simulated host (fast reconnects), closed afterwards."""
    session = HostSession(profiles[0], backoff=QUICK)
    session.start()
    assert await session.wait_connected(10)
    yield session
    await session.close()


async def until(predicate: Callable[[], bool], timeout: float = 20.0) -> None:
    deadline = pace.deadline(timeout)
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.01)


def numbered(n: int) -> str:
    """Line n of the test stream: mostly records, every 4th a traceback-style continuation,
    every 9th coloured (journalctl then sends MESSAGE as a byte array)."""
    if n % 4 == 0:
        return f"    continuation seq={n}"
    if n % 9 == 0:
        return f"\x1b[32m[2026-01-01 00:00:00 TP0] seq={n} coloured\x1b[0m"
    return f"[2026-01-01 00:00:00 TP0] seq={n}"


def shown(n: int) -> str:
    return numbered(n).replace("\x1b[32m", "").replace("\x1b[0m", "")


async def test_every_line_exactly_once_in_order_across_20_torn_disconnects(
    sim: SimFleet, profiles: list[Profile], session: HostSession
) -> None:
    profile = profiles[0]
    host = sim.hosts[profile.name]
    records: list[JournalEntry] = []
    # A pending record is delivered after 1 s without a line, not 0.1 s: a reconnect on a
    # loaded machine (a fresh clone's full run) took longer than 0.1 s to bring the next line,
    # and the idle flush then delivered a record before the continuation that belonged to it.
    follower = JournalFollower(session, UNIT, records.extend, backoff=QUICK, flush_idle_s=1.0)
    task = asyncio.create_task(follower.run())
    try:
        await until(lambda: follower.restarts == 1)
        n = 0

        def write(count: int) -> None:
            nonlocal n
            for _ in range(count):
                n += 1
                host.journal.append(UNIT, numbered(n), _PID="77", _SYSTEMD_INVOCATION_ID="a" * 32)

        for disconnect in range(20):
            write(25)
            await asyncio.sleep(0.02)  # let some lines through on this connection
            host.torn_aborts = 1  # the next write is cut mid-line and the link aborted
            write(25)
            await until(lambda: host.torn_aborts == 0)
            await until(lambda d=disconnect: follower.restarts >= d + 2)  # type: ignore[misc]
        write(23)  # ends on a continuation: only the idle flush can deliver it
        assert n == 1023

        def lines() -> list[str]:
            return [line for record in records for line in record.lines]

        await until(lambda: len(lines()) >= n)
        await asyncio.sleep(0.3)  # anything doubled would arrive now
        assert lines() == [shown(i) for i in range(1, n + 1)]
        assert follower.restarts == 21
        # Continuations were attached to the record before them, never delivered alone.
        for record in records:
            assert record.message.startswith("[2026-01-01"), record
            assert all(line.startswith("    continuation") for line in record.continuation)
        assert sum(len(r.continuation) for r in records) == n // 4
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_rate_limit_gap_restart_marker_and_traceback_record(
    sim: SimFleet, profiles: list[Profile], session: HostSession
) -> None:
    profile = profiles[0]
    host = sim.hosts[profile.name]
    journal = host.journal
    records: list[JournalEntry] = []
    follower = JournalFollower(session, UNIT, records.extend, backoff=QUICK)
    task = asyncio.create_task(follower.run())
    first, second = "1" * 32, "2" * 32
    try:
        await until(lambda: follower.restarts == 1)
        journal.append(UNIT, "[2026-01-01 00:00:00] up", _PID="5", _SYSTEMD_INVOCATION_ID=first)
        journal.append(
            UNIT,
            "[2026-01-01 00:00:01 TP0] Scheduler hit an exception: Traceback (most recent call "
            "last):",
            _PID="5",
            _SYSTEMD_INVOCATION_ID=first,
        )
        for line in (
            '  File "scheduler.py", line 2769, in run_scheduler_process',
            "RuntimeError: CUDA error: an illegal memory access was encountered",
        ):
            journal.append(UNIT, line, _PID="5", _SYSTEMD_INVOCATION_ID=first)
        journal.append(UNIT, f"Stopped {UNIT}.", _PID="1")
        journal.rate_limits[UNIT] = RateLimit(interval_s=0.2, burst=3)
        for i in range(10):
            journal.append(UNIT, f"[2026-01-01 00:00:02] burst {i}", _PID="6",
                           _SYSTEMD_INVOCATION_ID=second)  # fmt: skip
        await asyncio.sleep(0.25)
        journal.append(UNIT, "[2026-01-01 00:00:03] after", _PID="6", _SYSTEMD_INVOCATION_ID=second)
        await until(lambda: any(r.message.endswith("after") for r in records))
        by_message = {r.message: r for r in records}
        crash = by_message[
            "[2026-01-01 00:00:01 TP0] Scheduler hit an exception: Traceback (most recent call "
            "last):"
        ]
        assert len(crash.continuation) == 2
        assert crash.crash == "illegal_memory_access"  # the most specific signature names it
        assert not by_message[f"Stopped {UNIT}."].continuation  # systemd is another process
        restarted = by_message["[2026-01-01 00:00:02] burst 0"]
        assert restarted.new_invocation and restarted.invocation == second
        assert [r.dropped for r in records if r.dropped] == [7]
        assert sum(1 for r in records if r.new_invocation) == 1
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_the_gate_is_asked_before_every_slice_of_a_large_read(
    sim: SimFleet, profiles: list[Profile], session: HostSession
) -> None:
    """The gate (a full inbox; the engine pausing for a key) holds within 256 lines, not after
    the ~1000 of a whole read; the rest waits, then arrives exactly once and in order."""
    profile = profiles[0]
    host = sim.hosts[profile.name]
    records: list[JournalEntry] = []
    slices_allowed = [0]

    async def wait_for_a_turn() -> None:
        while slices_allowed[0] <= 0:  # noqa: ASYNC110
            await asyncio.sleep(0.01)
        slices_allowed[0] -= 1

    def gate() -> Awaitable[None] | None:
        if slices_allowed[0] > 0:
            slices_allowed[0] -= 1
            return None
        return wait_for_a_turn()

    batches: list[int] = []

    def deliver(batch: list[JournalEntry]) -> None:
        batches.append(len(batch))
        records.extend(batch)

    follower = JournalFollower(session, UNIT, deliver, backoff=QUICK, gate=gate)
    task = asyncio.create_task(follower.run())
    try:
        await until(lambda: follower.restarts == 1)
        for n in range(1, 3001):
            host.journal.append(UNIT, f"[2026-01-01 00:00:00 TP0] seq={n} " + "x" * 200)
        await asyncio.sleep(0.5)
        assert records == []  # read, but nothing decoded or delivered while the gate is shut
        for turn in range(1, 4):
            slices_allowed[0] = 1
            await until(lambda: slices_allowed[0] == 0)
            await asyncio.sleep(0.2)
            assert len(batches) == turn  # one slice per opening, never a whole read
        slices_allowed[0] = 10**6
        await until(lambda: len(records) == 3000)
        # Reads of up to 256 KiB (~500 of these lines) were delivered a slice at a time.
        assert max(batches) <= DELIVERY_SLICE
        assert [int(r.message.split("seq=")[1].split()[0]) for r in records] == list(range(1, 3001))
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
