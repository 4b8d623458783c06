"""On-demand bookkeeping: a host opens with its first reason, closes idle_close_s after its
last one went, and a reason coming back in between cancels the close (no churn)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from console.fleet.demand import PROBATION, SCREEN, SELECTED, Demand

IDLE_S = 60.0


@dataclass
class FakeTimer:
    at: float
    callback: Callable[[], None]
    cancelled: bool = False

    def cancel(self) -> None:
        self.cancelled = True


@dataclass
class Clock:
    """A clock the test moves: timers fire when `advance` passes their time."""

    now: float = 0.0
    timers: list[FakeTimer] = field(default_factory=list)

    def schedule(self, delay: float, callback: Callable[[], None]) -> FakeTimer:
        timer = FakeTimer(self.now + delay, callback)
        self.timers.append(timer)
        return timer

    def advance(self, seconds: float) -> None:
        self.now += seconds
        while due := [t for t in self.timers if not t.cancelled and t.at <= self.now]:
            timer = min(due, key=lambda t: t.at)
            self.timers.remove(timer)
            timer.callback()


@dataclass
class Recorder:
    events: list[str] = field(default_factory=list)

    def demand(self, clock: Clock, hosts: tuple[str, ...] = ("a", "b", "c")) -> Demand:
        return Demand(
            hosts,
            idle_close_s=IDLE_S,
            on_open=lambda h: self.events.append(f"open {h}"),
            on_close=lambda h: self.events.append(f"close {h}"),
            schedule=clock.schedule,
        )


def test_a_reason_opens_a_host_and_its_loss_closes_it_after_the_idle_time() -> None:
    clock, seen = Clock(), Recorder()
    demand = seen.demand(clock)
    assert seen.events == [] and not demand.is_open("a")
    demand.holders(SCREEN, ["a", "b"])
    assert seen.events == ["open a", "open b"]
    demand.holders(SCREEN, ["b"])  # a scrolled off
    assert demand.is_open("a") and not demand.wanted("a")
    clock.advance(IDLE_S - 1)
    assert seen.events == ["open a", "open b"]  # not yet
    clock.advance(1)
    assert seen.events == ["open a", "open b", "close a"]
    assert demand.open_hosts == {"b"}


def test_wanted_again_before_the_close_cancels_it() -> None:
    clock, seen = Clock(), Recorder()
    demand = seen.demand(clock)
    demand.holders(SCREEN, ["a"])
    for _ in range(5):  # scrolling past and back, again and again
        demand.holders(SCREEN, [])
        clock.advance(IDLE_S / 2)
        demand.holders(SCREEN, ["a"])
    clock.advance(10 * IDLE_S)
    assert seen.events == ["open a"]  # one connection, never closed


def test_a_host_stays_open_while_any_reason_holds_it() -> None:
    clock, seen = Clock(), Recorder()
    demand = seen.demand(clock)
    demand.holders(SCREEN, ["a"])
    demand.holders(SELECTED, ["a"])
    demand.hold("a", "rollout#1")
    demand.holders(SCREEN, [])
    demand.holders(SELECTED, ["b"])
    clock.advance(2 * IDLE_S)
    assert demand.reasons("a") == {"rollout#1"} and seen.events == ["open a", "open b"]
    demand.drop("a", "rollout#1")
    clock.advance(IDLE_S)
    assert seen.events == ["open a", "open b", "close a"]
    demand.drop("a", "rollout#1")  # dropping twice changes nothing
    assert seen.events == ["open a", "open b", "close a"]


def test_a_timed_reason_ends_by_itself_and_can_be_extended() -> None:
    clock, seen = Clock(), Recorder()
    demand = seen.demand(clock)
    demand.hold("c", PROBATION, for_s=100)
    clock.advance(90)
    demand.hold("c", PROBATION, for_s=100)  # a newer probation: the window moves on
    clock.advance(90)
    assert demand.reasons("c") == {PROBATION}
    clock.advance(10)
    assert demand.reasons("c") == frozenset() and demand.is_open("c")
    clock.advance(IDLE_S)
    assert seen.events == ["open c", "close c"]


def test_a_closed_host_opens_again_when_wanted() -> None:
    clock, seen = Clock(), Recorder()
    demand = seen.demand(clock)
    demand.holders(SELECTED, ["a"])
    demand.holders(SELECTED, [])
    clock.advance(IDLE_S)
    demand.holders(SELECTED, ["a"])
    assert seen.events == ["open a", "close a", "open a"]


def test_stop_cancels_every_pending_close() -> None:
    clock, seen = Clock(), Recorder()
    demand = seen.demand(clock)
    demand.holders(SCREEN, ["a", "b"])
    demand.hold("c", PROBATION, for_s=5)
    demand.holders(SCREEN, [])
    demand.stop()
    clock.advance(10 * IDLE_S)
    assert seen.events == ["open a", "open b", "open c"]
