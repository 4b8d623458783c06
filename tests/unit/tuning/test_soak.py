"""The soak window on an injected clock: it holds exactly its seconds, checks every poll,
and a crash line is checked the moment it arrives, not at the next poll."""

from __future__ import annotations

import asyncio
from typing import cast

import pytest

from console.tuning.invocation import InvocationWatch
from console.tuning.soak import soak
from tests.stand_ins import FakeClock


class Watch:
    """What the soak reads of an invocation watch."""

    def __init__(self) -> None:
        self.changed = asyncio.Event()
        self.signature: str | None = None
        self.last_accept_len: float | None = 6.04


class Crashed(Exception):
    pass


async def test_a_quiet_soak_holds_its_seconds_and_checks_every_poll() -> None:
    clock, watch = FakeClock(), Watch()
    checks: list[float] = []
    reports: list[str] = []

    async def check() -> None:
        checks.append(clock.monotonic() - start)

    start = clock.monotonic()
    task = asyncio.create_task(
        soak(
            cast(InvocationWatch, watch),
            30,
            poll_s=10,
            check=check,
            report=reports.append,
            clock=clock,
        )
    )
    for _ in range(3):
        await clock.when_waiting()
        assert not task.done()
        clock.advance(10)
    await task
    assert checks == [0, 10, 20, 30]
    assert reports == [
        "30s left · accept len 6.04",
        "20s left · accept len 6.04",
        "10s left · accept len 6.04",
    ]


async def test_a_crash_line_is_checked_when_it_arrives() -> None:
    clock, watch = FakeClock(), Watch()
    start = clock.monotonic()

    async def check() -> None:
        if watch.signature is not None:
            raise Crashed(f"{watch.signature} {clock.monotonic() - start:.0f}s in")

    task = asyncio.create_task(
        soak(
            cast(InvocationWatch, watch),
            30,
            poll_s=10,
            check=check,
            report=lambda _: None,
            clock=clock,
        )
    )
    await clock.when_waiting()
    clock.advance(3)  # not yet a poll: the soak only wakes for the journal
    await clock.when_waiting()
    watch.signature = "illegal memory access"
    watch.changed.set()
    with pytest.raises(Crashed, match="illegal memory access 3s in"):
        await task
