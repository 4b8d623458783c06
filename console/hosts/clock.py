"""The one clock: what time it is, and running something later.

Behaviour that depends on time (how stale a host's numbers are, when an idle host closes,
when a status poll or a probation window is due) reads a `Clock` it was given instead of
`time.time()` and `loop.call_later`, so a test can advance time at once instead of waiting
for it, and a loaded machine running the suite changes nothing a test checks. `SYSTEM` is
the real one.
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

    def call_later(self, delay: float, callback: Callable[[], None]) -> Timer:
        """Run `callback` on the calling loop after `delay` seconds."""
        ...


class SystemClock:
    """The machine's clock and the running loop's timers."""

    def time(self) -> float:
        return time.time()

    def call_later(self, delay: float, callback: Callable[[], None]) -> Timer:
        return asyncio.get_running_loop().call_later(delay, callback)


SYSTEM: Clock = SystemClock()
