"""Engine-thread events into the app: messages, the journal inbox, and keys first.

The fleet runs on the engine's own loop (console/ui/engine.py). Its events arrive here on that
thread, become Textual messages (or, for the journal firehose and the numbers, wait in an
inbox the app's timers drain), and a key press makes the engine sleep until the screen has
answered it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque

from textual import events

from console.hosts.events import (
    CrashDetected,
    Event,
    HealthChecked,
    HostStateChanged,
    InvocationChanged,
    JournalBatch,
    MetricsUpdated,
    ServiceReady,
    ServiceStatus,
)
from console.ui.shell import Shell
from console.watch.gpu_reader import GpuReading
from widgets.journal_view import JournalView
from widgets.messages import (
    CrashReceived,
    GpusUpdated,
    HealthUpdated,
    HostStateUpdated,
    RunChanged,
    ServiceStatusUpdated,
)

FLUSH_INTERVAL_S = 0.05
MAX_INBOX_RECORDS = 20_000
"""Journal records waiting for the view beyond which the followers pause (back-pressure)."""
DRAIN_BUDGET_S = 0.012
"""Time one flush may spend taking records from the inbox; the rest waits a tick."""
INPUT_PRIORITY_S = 0.1
"""After a key, the engine's thread sleeps until the screen has answered it (at most this
long): under a flood it would otherwise take half the GIL from the repaint the operator is
waiting for. The lines wait in the sockets and on the hosts meanwhile; nothing is lost."""


log = logging.getLogger(__name__)

STOP_WAIT_S = 15.0
"""How long quitting waits for the fleet to stop before cancelling what is left."""


class EngineBridge(Shell):
    """Starts and stops the engine, forwards its events, drains the journal inbox."""

    # Written by the engine's thread, read here: a dict item assignment and popitem, a
    # deque append and popleft, and two counters each written by one side only.
    _inbox: deque[JournalBatch]
    _inbox_added: int
    _inbox_taken: int
    _input_until: float
    input_priority_s = INPUT_PRIORITY_S
    """How long a key may hold the engine at most (a test on a starved core raises it to see
    the hold end with the repaint, not with the limit)."""
    _input_key: object

    def _start_engine(self) -> None:
        self.fleet.listen(self._forward)
        # Back-pressure: while the app is behind, the followers stop reading and the lines
        # wait in the hosts' journals (no loss) instead of in this process's memory.
        self.fleet.pressure = lambda: self.inbox_records > MAX_INBOX_RECORDS
        # Input comes first: while a key is being answered the engine sleeps (see on_event).
        self.fleet.checkpoint = self.engine.checkpoint
        self.fleet.on_gpus = self._gpus_read
        self.engine.start()
        self.engine.call(self.fleet.start)

    def _gpus_read(self, reading: GpuReading) -> None:  # on the engine's thread
        self.post_message(GpusUpdated(reading))

    async def _stop_engine(self) -> None:
        """Quitting never hangs: what the fleet has not stopped within STOP_WAIT_S is
        cancelled with the engine's loop, and named in the log."""
        if self.engine.running:
            try:
                async with asyncio.timeout(STOP_WAIT_S):
                    await self.engine.run(self._stop_fleet())
            except TimeoutError:
                log.warning("stopping took over %gs; waiting still: %s", STOP_WAIT_S,
                            "; ".join(self.engine.pending()))  # fmt: skip
            self.engine.stop()

    async def _stop_fleet(self) -> None:  # on the engine's loop
        await self.probation.stop()
        await self.left_on.stop()
        await self.fleet.stop()

    async def on_event(self, event: events.Event) -> None:
        if not isinstance(event, events.Key):
            await super().on_event(event)
            return
        # A key reaches the app twice (dispatched, then bubbled back from the focused
        # widget): only the refresh after the last arrival answers it.
        self._input_until = time.monotonic() + self.input_priority_s
        self._input_key = key = object()
        self.engine.pause(self.input_priority_s)  # released by `_input_answered`
        await super().on_event(event)
        self.call_after_refresh(self._input_answered, key)

    def _input_answered(self, key: object) -> None:
        if key is self._input_key:
            self._input_until = 0.0
            self.engine.resume()

    @property
    def inbox_records(self) -> int:
        """Journal records delivered by the engine and not yet taken by the view."""
        return self._inbox_added - self._inbox_taken

    def _forward(self, event: Event) -> None:
        """Runs on the engine's thread: only thread-safe steps here."""
        self.probation.observe(event)
        self.left_on.observe(event)
        if isinstance(event, HostStateChanged):
            self.post_message(HostStateUpdated(event))
        elif isinstance(event, ServiceStatus):
            self.post_message(ServiceStatusUpdated(event))
        elif isinstance(event, JournalBatch):
            # The firehose skips the message queue: a key press must never wait behind
            # hundreds of queued batches. The flush timer drains this inbox in slices.
            self._inbox_added += len(event.entries)
            self._inbox.append(event)
        elif isinstance(event, MetricsUpdated):
            due = self._metrics_due.get(event.host)
            if event.source == "journal" or due is None or due.source != "journal":
                self._metrics_due[event.host] = event  # drawn by the metrics timer
        elif isinstance(event, CrashDetected):
            self.post_message(CrashReceived(event))
        elif isinstance(event, HealthChecked):
            self.post_message(HealthUpdated(event))
        elif isinstance(event, InvocationChanged | ServiceReady):
            self.post_message(RunChanged(event))

    def _flush_journal(self) -> None:
        view = self.main(JournalView)  # also behind a modal; none once shutting down
        if view is None or time.monotonic() < self._input_until:
            return  # a key is waiting for its repaint: the new lines go in the frame after
        deadline = time.perf_counter() + DRAIN_BUDGET_S
        while self._inbox and time.perf_counter() < deadline:
            batch = self._inbox.popleft()
            self._inbox_taken += len(batch.entries)
            view.add(batch.host, batch.entries)
        view.flush()
