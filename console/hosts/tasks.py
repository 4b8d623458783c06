"""Stopping a task: cancel it and wait for its end, without swallowing the caller's own
cancellation.

`task.cancel(); with suppress(CancelledError): await task` swallows a cancellation of the
*caller* that arrives during the await: the caller then carries on as if never stopped, and
whatever waits for it (a fleet's stop, the app's quit) waits for good. `asyncio.wait` never
raises what the task raised, so only the caller's own cancellation gets out of `stop`.
"""

from __future__ import annotations

import asyncio
from typing import Any

RECANCEL_S = 0.5
"""How long a stopped task has to end before it is cancelled again."""


async def stop(task: asyncio.Future[Any]) -> BaseException | None:
    """Cancel `task`, wait until it has ended; what it ended with other than its
    cancellation is returned (and so retrieved), not raised.

    A task can lose a cancel it did not catch: asyncssh's `connect` bounds the attempt with
    Python 3.11's `asyncio.wait_for`, which hands back the attempt's outcome (a refused
    connection, say) when the cancel lands as the attempt ends, and a session's supervisor
    then went on to its next back-off; its `close()` waited for good (a CI run's 240 s
    timeout). So a task still running after `RECANCEL_S` is cancelled again."""
    task.cancel()
    while not task.done():
        await asyncio.wait({task}, timeout=RECANCEL_S)
        if not task.done():
            task.cancel()
    return None if task.cancelled() else task.exception()
