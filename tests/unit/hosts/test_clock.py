"""Waiting on the one clock: a timeout is the clock's, and a cancellation is never lost."""

from __future__ import annotations

import asyncio

import pytest

from console.hosts import clock as clocks
from console.hosts import tasks
from console.hosts.clock import SYSTEM
from tests.stand_ins import FakeClock


async def test_a_wait_times_out_when_the_clock_says_so() -> None:
    clock, event = FakeClock(), asyncio.Event()
    task = asyncio.create_task(clocks.wait(clock, event, 30))
    await clock.when_waiting()
    clock.advance(29)
    await asyncio.sleep(0)
    assert not task.done()
    clock.advance(1)
    assert await task is False


async def test_a_wait_ends_when_its_event_is_set() -> None:
    clock, event = FakeClock(), asyncio.Event()
    task = asyncio.create_task(clocks.wait(clock, event, 30))
    await clock.when_waiting()
    event.set()
    assert await task is True
    assert clock.waiting == 0  # its timer is gone with it


async def test_a_cancel_that_arrives_as_the_wait_ends_still_cancels() -> None:
    """A follower stopped just as its wake-up came stayed 'cancelling' for good, and the
    fleet's stop waited on it until the test's timeout."""
    for turns in range(6):  # the cancel lands at each step of the wait's ending
        event = asyncio.Event()
        task = asyncio.create_task(clocks.wait(SYSTEM, event, 30))
        await asyncio.sleep(0)
        event.set()
        for _ in range(turns):
            await asyncio.sleep(0)
        if task.done():
            break
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


async def test_a_sleep_is_the_clocks() -> None:
    clock = FakeClock()
    task = asyncio.create_task(clocks.sleep(clock, 5))
    await clock.when_waiting()
    clock.advance(4.9)
    await asyncio.sleep(0)
    assert not task.done()
    clock.advance(0.1)
    await task


async def test_stopping_a_task_never_swallows_the_stoppers_own_cancel() -> None:
    """`cancel(); with suppress(CancelledError): await task` swallowed a cancel of the caller
    arriving during the await: the caller went on as if never stopped."""

    async def slow_to_stop() -> None:
        try:
            await asyncio.sleep(3600)
        finally:
            await asyncio.sleep(0.05)  # cleanup that takes a moment (a channel's close)

    async def stopper(task: asyncio.Task[None]) -> str:
        await tasks.stop(task)
        return "carried on"

    inner = asyncio.create_task(slow_to_stop())
    await asyncio.sleep(0)
    outer = asyncio.create_task(stopper(inner))
    await asyncio.sleep(0.01)  # the stopper is waiting for the cleanup
    outer.cancel()
    with pytest.raises(asyncio.CancelledError):
        await outer
    await asyncio.wait({inner})
    assert inner.cancelled()
