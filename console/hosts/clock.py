"""The one clock: what time it is, waiting, and running something later.

Behaviour that depends on time (how stale a host's numbers are, when an idle host closes,
reconnect back-off, health and status polls, soak windows, probation countdowns, crash-loop
windows) reads a `Clock` it was given instead of `time.time()`, `asyncio.sleep` and
`loop.call_later`, so a test can advance time at once instead of waiting for it, and a
loaded machine running the suite changes nothing a test checks. `SYSTEM` is the real one.

A clock only needs `time`, `monotonic` and `call_later`; `sleep` and `wait` are built on
`call_later`, so every clock (the tests' `FakeClock` included) waits the same way.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Protocol


class Timer(Protocol):
    def cancel(self) -> None: ...


class Clock(Protocol):
    def time(self) -> float:
        """Seconds since the epoch (wall time, comparable with the hosts' journal)."""
        ...

    def monotonic(self) -> float:
        """Seconds that only go forward: deadlines and durations."""
        ...

    def call_later(self, delay: float, callback: Callable[[], None]) -> Timer:
        """Run `callback` on the calling loop after `delay` seconds."""
        ...


class SystemClock:
    """The machine's clock and the running loop's timers."""

    def time(self) -> float:
        return time.time()

    def monotonic(self) -> float:
        return time.monotonic()

    def call_later(self, delay: float, callback: Callable[[], None]) -> Timer:
        return asyncio.get_running_loop().call_later(delay, callback)


SYSTEM: Clock = SystemClock()


async def sleep(clock: Clock, seconds: float) -> None:
    """`asyncio.sleep` on `clock`."""
    if seconds <= 0:
        await asyncio.sleep(0)
        return
    done = asyncio.get_running_loop().create_future()

    def wake() -> None:
        if not done.done():
            done.set_result(None)

    timer = clock.call_later(seconds, wake)
    try:
        await done
    finally:
        timer.cancel()


async def wait(clock: Clock, event: asyncio.Event, timeout: float | None) -> bool:
    """Wait for `event` at most `timeout` seconds of `clock` (None: for ever); True when it
    is set. Cancelling the caller cancels the wait: nothing in it is awaited on the way out,
    so a cancellation that arrives as the wait ends is never swallowed."""
    if event.is_set():
        return True
    if timeout is None:
        await event.wait()
        return True
    done = asyncio.get_running_loop().create_future()

    def finish(*_: object) -> None:
        if not done.done():
            done.set_result(None)

    timer = clock.call_later(max(0.0, timeout), finish)
    waiter = asyncio.ensure_future(event.wait())
    waiter.add_done_callback(finish)
    try:
        await done
    finally:
        timer.cancel()
        waiter.cancel()
    return event.is_set()
