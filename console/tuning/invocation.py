"""Watching one invocation of a service start: its journal, crash signatures, start-up phase.

After a restart the only trustworthy news about the new server is in its own journal lines
(`_SYSTEMD_INVOCATION_ID`): it dies with an illegal memory access during CUDA graph capture
long before `/health` could say anything. `InvocationWatch` follows the unit's journal from a
cursor taken *before* the restart (so nothing between the restart and the follow is lost),
keeps the lines, and for the invocation in focus reports the first crash signature, what
the server was doing at the time, the first and the latest accept length it logged, each
decode line's generation throughput, and (by the journal's own timestamps) how long after
"ready to roll" it died.
"""

from __future__ import annotations

import asyncio
import re
from collections import deque
from collections.abc import Callable, Iterable

from console.hosts import tasks
from console.hosts.events import JournalEntry
from console.transport.ssh import HostSession
from console.watch.journal import JournalFollower
from console.watch.phase import phase_of
from console.watch.sglang import (
    CRASH_SIGNATURES,
    DecodeBatch,
    crash_signature,
    deprecation_warning,
    parse_line,
)

_RANK = {name: i for i, (name, _) in enumerate(CRASH_SIGNATURES)}
EXCEPTION_RE = re.compile(r"^\s*(?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception|Exit)\b:? ")
"""A traceback's last line: `torch.AcceleratorError: CUDA error: …`, `RuntimeError: …`."""
MAX_KEPT = 50_000


class InvocationWatch:
    """Follows a unit's journal and scans the entries of the invocation in focus."""

    def __init__(
        self,
        session: HostSession,
        unit: str,
        cursor: str | None,
        on_lines: Callable[[str, list[str]], None] | None = None,
    ) -> None:
        self._on_lines = on_lines
        self._entries: deque[JournalEntry] = deque(maxlen=MAX_KEPT)
        self._follower = JournalFollower(
            session, unit, self._deliver, cursor=cursor, history=0 if cursor else 1000
        )
        self._task: asyncio.Task[None] | None = None
        self.warnings: list[str] = []
        """Deprecation warnings any watched invocation printed at start-up, each once."""
        self.changed = asyncio.Event()
        """Set whenever entries of the focused invocation arrive (cleared by the reader)."""
        self._reset(None)

    def _reset(self, target: str | None) -> None:
        self.target = target
        self.signature: str | None = None
        self.crash_line: str | None = None
        self.crash_phase: str | None = None
        self.phase = "starting"
        self.accept_len: float | None = None
        self.last_accept_len: float | None = None
        self.gen_throughputs: list[float] = []
        """Every decode line's `gen throughput` (tok/s), in order."""
        self.ready_at: float | None = None
        """Journal time (epoch seconds) of the server's "ready to roll" line."""
        self.crash_at: float | None = None
        """Journal time of the first crash signature."""
        self.exception_line: str | None = None
        """The last line that names a Python exception (`SomeError: …`)."""
        self.lines: list[str] = []
        """The focused invocation's lines so far (systemd's own lines about it included)."""
        self._inside = False

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._follower.run(), name="rollout-journal")

    async def stop(self) -> None:
        if self._task is not None:
            await tasks.stop(self._task)
            self._task = None

    def focus(self, invocation: str) -> None:
        """Watch `invocation` from now on (entries that already arrived are scanned too)."""
        self._reset(invocation)
        self._scan(list(self._entries))

    def _deliver(self, entries: list[JournalEntry]) -> None:
        self._entries.extend(entries)
        if self.target is not None:
            self._scan(entries)

    def _scan(self, entries: Iterable[JournalEntry]) -> None:
        fresh: list[str] = []
        for entry in entries:
            if entry.invocation == self.target:
                self._inside = True
            elif entry.invocation is not None:
                self._inside = False  # another invocation (an auto-restart) has begun
                continue
            elif not self._inside:
                continue  # systemd's lines about an older invocation
            for message in (entry.message, *entry.continuation):
                fresh.append(message)
                self._observe(message, entry.timestamp)
        if fresh:
            self.lines.extend(fresh)
            if self._on_lines is not None and self.target is not None:
                self._on_lines(self.target, fresh)
            self.changed.set()

    @property
    def ready_to_crash_s(self) -> float | None:
        """Seconds from "ready to roll" to the first crash line (None: not both seen)."""
        if self.ready_at is None or self.crash_at is None:
            return None
        return max(0.0, self.crash_at - self.ready_at)

    def _observe(self, message: str, timestamp: float) -> None:
        if EXCEPTION_RE.match(message):
            self.exception_line = message.strip()
        warning = deprecation_warning(message) if "deprecated" in message else None
        if warning is not None and warning not in self.warnings:
            self.warnings.append(warning)
        signature = crash_signature(message)
        if signature is not None:
            if self.signature is None:
                self.crash_phase = self.phase
                self.crash_at = timestamp
            if self.signature is None or _RANK[signature] < _RANK[self.signature]:
                self.signature = signature  # the most specific one names the crash
                self.crash_line = message
            return
        phase = phase_of(message)
        if phase is None:
            return
        self.phase = phase
        if phase == "serving" and self.ready_at is None:
            self.ready_at = timestamp
        parsed = parse_line(message) if phase == "decoding" else None
        if isinstance(parsed, DecodeBatch) and parsed.gen_throughput is not None:
            self.gen_throughputs.append(parsed.gen_throughput)
        if isinstance(parsed, DecodeBatch) and parsed.accept_len is not None:
            self.last_accept_len = parsed.accept_len
            if self.accept_len is None:
                self.accept_len = parsed.accept_len
