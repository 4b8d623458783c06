"""Stopping never hangs: a wait that completes just as it is cancelled is still cancelled.

Python 3.11's `asyncio.wait_for` returns the inner result when the cancel and the
completion land in the same loop iteration, and the cancel is lost: the fleet's status poll
then went back to waiting for an hour and `Fleet.stop()` waited for it forever (seen in CI).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from console.hosts import tasks
from console.hosts.profiles import load_profile
from console.transport.ssh import HostSession

PROFILE = """
name = "gpu1"
[ssh]
host = "127.0.0.1"
[service]
unit = "sglang.service"
"""


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_a_wait_cancelled_as_it_completes_is_cancelled(tmp_path: Path) -> None:
    path = tmp_path / "gpu1.toml"
    path.write_text(PROFILE)
    session = HostSession(load_profile(path))
    waiter = asyncio.create_task(session.wait_connected(3600))
    await settle()
    session._connected.set()  # the wait completes and the stop arrives in one loop iteration
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter


async def test_stop_ends_a_task_that_lost_its_first_cancel() -> None:
    """asyncssh's connect runs in 3.11's `wait_for`, which can eat a cancel: the session's
    supervisor then carried on to its next attempt, and `stop` must cancel it again."""
    attempts: list[int] = []

    async def supervisor() -> None:
        while True:
            attempts.append(len(attempts))
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                if len(attempts) == 1:
                    continue  # as wait_for returning the attempt's outcome instead
                raise

    task = asyncio.create_task(supervisor())
    await settle()
    assert await tasks.stop(task) is None
    assert task.cancelled() and attempts == [0, 1]


def test_the_core_bounds_waits_with_asyncio_timeout_only() -> None:
    """`asyncio.timeout` honours a cancel that races a completion; 3.11's `wait_for` does not."""
    repo = Path(__file__).resolve().parents[2]
    offenders = [
        f"{path.relative_to(repo)}:{n}"
        for folder in ("console", "widgets")
        for path in sorted((repo / folder).rglob("*.py"))
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if "asyncio.wait_for(" in line
    ]
    assert offenders == []


def test_the_core_stops_tasks_without_swallowing_its_own_cancel() -> None:
    """`with suppress(CancelledError): await task` swallows a cancel of the caller that lands
    during the await (a follower stopped as it woke stayed "cancelling" and `Fleet.stop()`
    waited for it: CI's 120 s timeouts); `console.hosts.tasks.stop` is the one way."""
    repo = Path(__file__).resolve().parents[2]
    offenders = []
    for folder in ("console", "widgets"):
        for path in sorted((repo / folder).rglob("*.py")):
            if path.parts[-2] == "sim":
                continue  # the simulated hosts' own handlers end with their connection
            lines = path.read_text().splitlines()
            for n, line in enumerate(lines[:-1], 1):
                if "suppress(asyncio.CancelledError" in line and "await " in lines[n]:
                    offenders.append(f"{path.relative_to(repo)}:{n}")
    assert offenders == []
