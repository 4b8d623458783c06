"""Stand-ins for what a test must control or does not exercise: a clock the test advances
(console/hosts/clock.py), and the probation guard's change, whose real path
(console/tuning/change.py) the integration and UI tests run on simulated hosts."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any

from console.hosts.events import ChangeAction, RolloutFinished, RolloutOutcome
from console.transport.ssh import HostSession
from console.tuning.change import ChangeOutcome
from console.tuning.plan import Plan
from console.tuning.probation import ProbationCrash, ProbationGuard


class PlannedOnlyGuard(ProbationGuard):
    """A guard whose rollbacks are only planned: each plan is kept in `plans` and ends
    `healthy` (True: applied; False: failed) without touching the host."""

    def __init__(self, *args: Any, healthy: bool = True, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.plans: list[Plan] = []
        self.healthy = healthy

    async def _change(
        self, session: HostSession, plan: Plan, crash: ProbationCrash
    ) -> ChangeOutcome:
        self.plans.append(plan)
        outcome = RolloutOutcome.APPLIED if self.healthy else RolloutOutcome.FAILED
        result = RolloutFinished(plan.host, outcome)
        return ChangeOutcome(plan.host, ChangeAction.PROBATION_ROLLBACK, plan.summary(), result)


class FakeClock:
    """A clock that moves only when the test says so (`advance`). Its timers run, in order of
    their due time, on the loop that set them (the engine's thread in the TUI), so a test on
    another thread may advance it."""

    def __init__(self, start: float | None = None) -> None:
        self.now = time.time() if start is None else start
        self._timers: list[_FakeTimer] = []
        self._lock = threading.Lock()

    def time(self) -> float:
        return self.now

    def monotonic(self) -> float:
        return self.now

    def call_later(self, delay: float, callback: Callable[[], None]) -> _FakeTimer:
        timer = _FakeTimer(self.now + delay, callback, asyncio.get_running_loop())
        with self._lock:
            self._timers.append(timer)
        return timer

    @property
    def waiting(self) -> int:
        """Timers set and not yet due (a sleep, a timeout, an idle close)."""
        with self._lock:
            return sum(not t.cancelled for t in self._timers)

    async def when_waiting(self, count: int = 1, *, turns: int = 10_000) -> None:
        """Let the loop run until `count` timers wait on this clock (everything that can
        run before sleeping has run); fails after `turns` loop turns, not after a time."""
        for _ in range(turns):
            if self.waiting >= count:
                return
            await asyncio.sleep(0)
        raise AssertionError(f"{self.waiting} timers wait on the clock, not {count}")

    def advance(self, seconds: float) -> None:
        """Move time on by `seconds`; the timers now due run (soon, on their own loops)."""
        with self._lock:
            self.now += seconds
            due = sorted((t for t in self._timers if t.due <= self.now), key=lambda t: t.due)
            self._timers = [t for t in self._timers if t.due > self.now]
        for timer in due:
            if not timer.cancelled:
                timer.loop.call_soon_threadsafe(timer.fire)


class _FakeTimer:
    def __init__(
        self, due: float, callback: Callable[[], None], loop: asyncio.AbstractEventLoop
    ) -> None:
        self.due = due
        self.callback = callback
        self.loop = loop
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True

    def fire(self) -> None:
        if not self.cancelled:
            self.callback()
