"""Small async helpers the testbed tests share: waiting, connecting, asking sshd and HTTP."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from console.hosts.profiles import Profile
from console.transport.ssh import Backoff, HostSession, HostState
from tests import pace
from tests.testbed.hosts import Host
from tests.testbed.layout import SERVICE_PORT

QUICK = Backoff(initial_s=0.1, cap_s=1.0)


async def until(predicate: Callable[[], object], timeout: float, what: str) -> None:
    """Wait for `predicate` (a liveness bound, not a timing assertion)."""
    deadline = pace.deadline(timeout)
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"not reached within {timeout:.0f}s: {what}")
        await asyncio.sleep(0.05)


async def connected(profile: Profile, states: list[HostState] | None = None) -> HostSession:
    session = HostSession(
        profile, on_state=states.append if states is not None else None, backoff=QUICK
    )
    session.start()
    assert await session.wait_connected(20), session.state
    return session


def accepted_logins(host: Host) -> list[str]:
    """sshd's own record of the logins it accepted (its journal)."""
    log = host.run("journalctl", "-u", "ssh.service", "-o", "cat", "--no-pager").stdout
    return [line for line in log.splitlines() if line.startswith("Accepted publickey")]


async def http_get(session: HostSession, path: str, port: int = SERVICE_PORT) -> str:
    """GET over the session's TCP forwarding (the console's way to reach the server)."""
    reader, writer = await session.open_tcp(port)
    writer.write(f"GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n".encode())
    response = await reader.read()
    writer.close()
    return response.decode()
