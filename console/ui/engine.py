"""The engine's own event loop, on a thread of its own, for the TUI.

On one event loop the hosts and the screen take turns: under a flood (8 hosts logging 5k
lines/s each) SSH decryption, JSON decoding and metrics run as callbacks of several
milliseconds each, and every hop of a key press (key, binding, row highlight, repaint) waits
behind a round of them — keypress → repaint p99 was 120–190 ms. With the engine (sessions,
followers, status polls, rollouts, snapshots) on this loop, the UI still shares the GIL, but
CPython hands it over every switch interval, so a key waits milliseconds, not for batches.

The rules that keep it correct:
- Everything that touches a session, a follower or the fleet's tasks runs on this loop:
  `run` (await a coroutine from another loop) or `call` (a plain function).
- The UI can hold the engine while it answers a key (`pause`/`resume`): the engine's thread
  then sleeps at its next checkpoint, at most for the pause's limit.
- The engine reaches the UI only through thread-safe operations (Textual's `post_message`,
  `deque.append`, single dict item assignment) and the UI reads engine state only where it is
  guarded (`HostMonitor`'s lock) or replaced whole (`Fleet.status` items).

The headless CLI keeps the engine on its one loop: it has no screen to keep responsive.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import sys
import threading
import time
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")

SWITCH_INTERVAL_S = 0.001
"""How long a busy thread keeps the GIL while another waits (CPython's default: 5 ms).

Each hop of a key press through Textual is a turn of the UI's loop, which releases the GIL
in its `epoll_wait`; a busy engine then keeps it for up to one interval per hop, and a host
switch takes several hops."""
STOP_TIMEOUT_S = 10.0


class EngineThread:
    """An asyncio loop running on a daemon thread until `stop`."""

    def __init__(self, name: str = "specops-engine") -> None:
        self.name = name
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._switch_interval: float | None = None
        self._paused_until = 0.0
        self._resumed = threading.Event()
        self._resumed.set()

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            raise RuntimeError(f"{self.name} is not running")
        return self._loop

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        if self._thread is not None:
            raise RuntimeError(f"{self.name} was already started")
        self._switch_interval = sys.getswitchinterval()
        sys.setswitchinterval(min(self._switch_interval, SWITCH_INTERVAL_S))
        self._thread = threading.Thread(target=self._main, name=self.name, daemon=True)
        self._thread.start()
        self._ready.wait()

    def _main(self) -> None:
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        self._loop = loop
        self._ready.set()
        try:
            loop.run_forever()
        finally:
            leftovers = asyncio.all_tasks(loop)
            for task in leftovers:
                task.cancel()
            loop.run_until_complete(asyncio.gather(*leftovers, return_exceptions=True))
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

    def pending(self) -> list[str]:
        """The engine's unfinished tasks, each with where it waits (`name: file:line < …`):
        what a stop that does not end is waiting for."""
        if self._loop is None or self._loop.is_closed():
            return []
        found = []
        for task in asyncio.all_tasks(self._loop):
            where: list[str] = []
            coro: Any = task.get_coro()
            while coro is not None and len(where) < 8:
                frame = getattr(coro, "cr_frame", None) or getattr(coro, "ag_frame", None)
                if frame is not None:
                    where.append(f"{frame.f_code.co_filename.rsplit('/', 1)[-1]}:{frame.f_lineno}")
                coro = getattr(coro, "cr_await", None) or getattr(coro, "ag_await", None)
            found.append(f"{task.get_name()}: {' < '.join(where)}")
        return found

    def call(self, function: Callable[..., object], *args: object) -> None:
        """Run `function(*args)` on the engine's loop, soon; returns at once."""
        self.loop.call_soon_threadsafe(function, *args)

    def pause(self, limit: float) -> None:
        """Hold the engine at its next checkpoint until `resume`, for at most `limit` s.

        Called by the UI when a key arrives: until its answer is painted, the engine's
        thread sleeps instead of competing for the GIL (sharing it, the UI's work for one
        key took twice as long). Lines wait in the socket and the hosts' journals.
        """
        if not self.running or self._loop is None or self._loop.is_closed():
            return
        self._paused_until = time.monotonic() + limit
        self._resumed.clear()
        self._loop.call_soon_threadsafe(self.checkpoint)

    def resume(self) -> None:
        self._resumed.set()

    def checkpoint(self) -> None:
        """On the engine's thread: block while paused (never past the pause's limit).

        Runs as a callback as soon as the loop gets to it, and from the followers' gate
        before each slice of journal, so a pause takes hold within one slice.
        """
        if not self._resumed.is_set():
            left = self._paused_until - time.monotonic()
            if left > 0:
                self._resumed.wait(left)

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Start `coro` on the engine's loop; its result as a thread-safe future."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    async def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Await `coro` running on the engine's loop from another loop.

        Cancelling the caller cancels the engine's task too.
        """
        return await asyncio.wrap_future(self.submit(coro))

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> None:
        """Stop the loop (its leftover tasks are cancelled) and wait for the thread."""
        thread, loop = self._thread, self._loop
        if thread is None or loop is None:
            return
        if thread.is_alive():
            loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout)
            if thread.is_alive():
                log.warning("%s did not stop within %.0f s", self.name, timeout)
        if self._switch_interval is not None:
            sys.setswitchinterval(self._switch_interval)
