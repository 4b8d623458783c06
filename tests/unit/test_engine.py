"""The engine's own loop: work crosses threads with its result, errors and cancellation."""

from __future__ import annotations

import asyncio
import sys
import threading
from collections.abc import Iterator

import pytest

from console.ui.engine import SWITCH_INTERVAL_S, EngineThread


@pytest.fixture
def engine() -> Iterator[EngineThread]:
    engine = EngineThread(name="test-engine")
    engine.start()
    yield engine
    engine.stop()


async def test_a_coroutine_runs_on_the_engine_thread_and_returns_its_result(
    engine: EngineThread,
) -> None:
    async def where() -> str:
        await asyncio.sleep(0)
        return threading.current_thread().name

    assert await engine.run(where()) == "test-engine"
    assert threading.current_thread().name != "test-engine"


async def test_an_error_on_the_engine_reaches_the_caller(engine: EngineThread) -> None:
    async def fail() -> None:
        raise ValueError("budget=99 is out of range")

    with pytest.raises(ValueError, match="budget=99"):
        await engine.run(fail())


async def test_cancelling_the_caller_cancels_the_engines_task(engine: EngineThread) -> None:
    started, cancelled = threading.Event(), threading.Event()

    async def long_job() -> None:
        started.set()
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    caller = asyncio.create_task(engine.run(long_job()))
    await asyncio.to_thread(started.wait, 5)
    caller.cancel()
    with pytest.raises(asyncio.CancelledError):
        await caller
    assert await asyncio.to_thread(cancelled.wait, 5)


async def test_call_runs_a_function_on_the_engine_loop(engine: EngineThread) -> None:
    seen: list[tuple[str, bool]] = []
    done = threading.Event()

    def record() -> None:
        seen.append((threading.current_thread().name, asyncio.get_running_loop() is engine.loop))
        done.set()

    engine.call(record)
    assert await asyncio.to_thread(done.wait, 5)
    assert seen == [("test-engine", True)]


def test_stop_cancels_what_is_left_and_restores_the_switch_interval() -> None:
    before = sys.getswitchinterval()
    engine = EngineThread()
    engine.start()
    assert sys.getswitchinterval() == min(before, SWITCH_INTERVAL_S)
    started, cleaned = threading.Event(), threading.Event()

    async def forever() -> None:
        started.set()
        try:
            await asyncio.sleep(3600)
        finally:
            cleaned.set()

    engine.submit(forever())
    assert started.wait(5)
    engine.stop()
    assert cleaned.is_set()  # its finally ran before stop returned
    assert not engine.running
    assert sys.getswitchinterval() == before
    with pytest.raises(RuntimeError, match="already started"):
        engine.start()


def test_a_pause_holds_the_engine_until_resumed(engine: EngineThread) -> None:
    ran = threading.Event()
    engine.pause(limit=30)
    engine.call(ran.set)
    assert not ran.wait(0.3)  # the engine sleeps at its checkpoint
    engine.resume()
    assert ran.wait(5)


def test_a_pause_never_outlasts_its_limit(engine: EngineThread) -> None:
    ran = threading.Event()
    engine.pause(limit=0.2)  # nobody resumes: the UI's answer never came
    engine.call(ran.set)
    assert ran.wait(5)


def test_a_pause_of_a_stopped_engine_does_nothing() -> None:
    engine = EngineThread()
    engine.pause(limit=30)
    engine.start()
    try:
        ran = threading.Event()
        engine.call(ran.set)
        assert ran.wait(5)
    finally:
        engine.stop()
    engine.pause(limit=30)


async def test_a_stop_that_does_not_end_can_say_what_it_waits_for(engine: EngineThread) -> None:
    """Quitting is bounded (console/ui/engine_bridge.py); the log then names each task still
    waiting and where, from `pending()`."""
    never = asyncio.Event()

    async def stuck_close() -> None:
        await never.wait()

    engine.submit(stuck_close())
    for _ in range(100):
        shown = engine.pending()
        if any("stuck_close" in line or "test_engine.py" in line for line in shown):
            break
        await asyncio.sleep(0.01)
    assert any("test_engine.py:" in line for line in shown), shown
