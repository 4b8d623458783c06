"""What several integration tests share: a headless simulated fleet in its own process, and
the first numbers a fleet's listeners get from each host."""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

from console.fleet.fleet import Fleet
from console.hosts.events import MetricsUpdated

SPECOPS = [sys.executable, "-m", "console"]


@contextlib.contextmanager
def served_fleet(directory: Path, hosts: int) -> Iterator[Path]:
    """`specops demo --serve DIR` in its own process, until the block ends."""
    home = directory / "home"
    home.mkdir(exist_ok=True)
    env = {**os.environ, "HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config")}
    env["XDG_STATE_HOME"] = str(home / ".state")
    proc = subprocess.Popen(
        [*SPECOPS, "demo", "--serve", str(directory), "--hosts", str(hosts), "--load-delay", "0.3"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    ready = threading.Event()

    def wait_ready() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:  # keep draining so the server never blocks on a full pipe
            if line.startswith("READY "):
                ready.set()

    threading.Thread(target=wait_ready, daemon=True).start()
    try:
        assert ready.wait(60), "demo --serve never printed READY"
        yield directory
    finally:
        proc.terminate()
        proc.wait(10)


async def first_numbers(fleet: Fleet, timeout: float = 10.0) -> dict[str, MetricsUpdated]:
    """Start `fleet`; the first MetricsUpdated of each host (stops the fleet when all came)."""
    seen: dict[str, MetricsUpdated] = {}
    everyone = asyncio.Event()

    def listen(event: object) -> None:
        if isinstance(event, MetricsUpdated):
            seen.setdefault(event.host, event)
            if len(seen) == len(fleet.profiles):
                everyone.set()

    fleet.listen(listen)
    fleet.start()
    try:
        async with asyncio.timeout(timeout):
            await everyone.wait()
    finally:
        await fleet.stop()
    return seen
