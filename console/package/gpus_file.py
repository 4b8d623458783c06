"""`HOST_logs/gpus.json` of a snapshot: the GPUs as they are when it is taken and the driver's
Xid errors of the last ten minutes, beside the journal excerpt, so a finding can say what
the cards held when the server died ("GPU 0 79.1 of 80 GiB", "Xid 31 on GPU 0 at 12:01:06").

Hosts without GPUs to read (no nvidia-smi, `[gpu] enabled = false`) get no file; a read that
fails or hangs is a note of the snapshot, never its failure.
"""

from __future__ import annotations

import asyncio
import json

from console.hosts.profiles import Profile
from console.transport import remote
from console.transport.ssh import HostSession, RemoteError
from console.watch.gpu_reader import read_all
from console.watch.gpus import QUERY


async def gpus_json(
    session: HostSession, profile: Profile, notes: list[str]
) -> tuple[str, remote.Command] | None:
    """The file's text and the command that read the GPUs (for the manifest's refetch);
    None when there is nothing to keep (a failed read is added to `notes`)."""
    gpu = profile.gpu
    if not gpu.enabled:
        return None
    try:
        async with asyncio.timeout(2 * gpu.timeout_s):
            reading, _ = await read_all(session, gpu, session.clock.time(), None, audited=True)
    except (RemoteError, TimeoutError) as exc:
        notes.append(f"GPUs not read: {exc}")
        return None
    if not reading.gpus and not reading.xids:
        return None
    body = {"read_at": reading.time, **reading.record()}
    command = remote.gpu_query(gpu.command, QUERY[1:], audited=True)
    return json.dumps(body, indent=2) + "\n", command
