"""What the GPUs said around a failed change: their state when the new setting answered ready
and right after it crashed, and the driver's Xid errors near the crash.

Read through the rollout's own session, each read bounded (a GPU off the bus can hang
nvidia-smi; the rollback must not wait on it) and audited as part of the change. Nothing here
can fail a rollout: a host without nvidia-smi, a kernel log the user may not read, a read that
times out all give no evidence, never an error.
"""

from __future__ import annotations

import asyncio
from typing import Any

from console.hosts.profiles import Profile
from console.transport.ssh import HostSession, RemoteError
from console.watch.gpu_reader import read_all, read_gpus

READ_S = 5.0
"""How long one read may take inside a rollout."""


async def gpus_now(session: HostSession, profile: Profile) -> tuple[dict[str, Any], ...]:
    """The host's GPUs as `status --json` lists them; () when they cannot be read."""
    if not profile.gpu.enabled:
        return ()
    try:
        async with asyncio.timeout(READ_S):
            reading = await read_gpus(session, profile.gpu, session.clock.time(), audited=True)
    except (RemoteError, TimeoutError):
        return ()
    return tuple(g.record() for g in reading.gpus)


async def at_crash(
    session: HostSession, profile: Profile, crash_at: float | None
) -> tuple[tuple[str, ...], tuple[dict[str, Any], ...]]:
    """The Xids within 30 s of `crash_at` (the crash line's time on the host's clock; None:
    no crash line, no Xid tied to it) and the GPUs now."""
    if not profile.gpu.enabled:
        return (), ()
    try:
        async with asyncio.timeout(2 * READ_S):
            reading, _ = await read_all(
                session, profile.gpu, session.clock.time(), None, audited=True
            )
    except (RemoteError, TimeoutError):
        return (), ()
    near = () if crash_at is None else tuple(x.text() for x in reading.xids if x.near(crash_at))
    return near, tuple(g.record() for g in reading.gpus)
