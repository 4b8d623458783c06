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


async def stop(task: asyncio.Future[Any]) -> BaseException | None:
    """Cancel `task`, wait until it has ended; what it ended with other than its
    cancellation is returned (and so retrieved), not raised."""
    task.cancel()
    await asyncio.wait({task})
    return None if task.cancelled() else task.exception()
