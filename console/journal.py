"""Cursor-tracked journal follower: every entry of a unit exactly once, across reconnects.

The follower asks journalctl for JSON, keeps the `__CURSOR` of the last entry it delivered,
and resumes every (re)started stream with `--after-cursor`. It delivers a batch first and
only then advances the cursor, so a drop between the two re-sends rather than loses. Before
the first follow it takes a baseline cursor, so a drop before the first new line still
resumes from the right place. Torn lines at a disconnect never reach the parser (the
session drops them) and journalctl's `-- …` informational lines are skipped.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from console import remote
from console.ssh import Backoff, CommandFailed, Disconnected, HostSession, RemoteError

log = logging.getLogger(__name__)

SUPPRESSED_MESSAGE_ID = "a596d6fe7bfa4994828e72309e95d61e"


@dataclass(frozen=True, slots=True)
class JournalEntry:
    """One journal record of the unit, decoded."""

    host: str
    cursor: str
    timestamp: float
    """Seconds since the epoch (journald's receive time)."""
    message: str
    priority: int = 6
    invocation: str | None = None
    pid: str | None = None
    seq: tuple[str, int] | None = None
    dropped: int = 0
    """For journald's `Suppressed N messages` notices: N (a known gap)."""
    continuation: tuple[str, ...] = field(default=())
    """Header-less lines (a traceback) that belong to this record."""


def decode_field(value: Any) -> str:
    """journald JSON fields are strings, byte arrays (non-UTF-8 or ANSI), null or lists."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        if all(isinstance(v, int) for v in value):
            return bytes(value).decode("utf-8", "replace")
        return "\n".join(decode_field(v) for v in value)
    return str(value)


def decode_entry(host: str, line: str) -> JournalEntry | None:
    """Parse one `-o json` line; None for journalctl's `-- …` notes and blank lines."""
    if not line or line.startswith("-- "):
        return None
    try:
        data = json.loads(line)
    except ValueError:
        log.warning("%s: undecodable journal line skipped: %.200r", host, line)
        return None
    cursor = data.get("__CURSOR")
    if not isinstance(cursor, str):
        return None
    message = decode_field(data.get("MESSAGE"))
    if data.get("MESSAGE") is None and "MESSAGE" in data:
        message = "[message longer than journald shows: use `journalctl -a`]"
    seq = None
    if "__SEQNUM" in data and "__SEQNUM_ID" in data:
        with contextlib.suppress(ValueError, TypeError):
            seq = (str(data["__SEQNUM_ID"]), int(data["__SEQNUM"]))
    dropped = 0
    if data.get("MESSAGE_ID") == SUPPRESSED_MESSAGE_ID:
        with contextlib.suppress(ValueError, TypeError):
            dropped = int(decode_field(data.get("N_DROPPED")) or 0)
        dropped = dropped or -1
    return JournalEntry(
        host=host,
        cursor=cursor,
        timestamp=_micros(data.get("__REALTIME_TIMESTAMP")),
        message=message,
        priority=_int(data.get("PRIORITY"), 6),
        invocation=decode_field(data.get("_SYSTEMD_INVOCATION_ID")) or None,
        pid=decode_field(data.get("_PID")) or None,
        seq=seq,
        dropped=dropped,
    )


def _micros(value: Any) -> float:
    try:
        return int(value) / 1_000_000
    except (TypeError, ValueError):
        return 0.0


def _int(value: Any, default: int) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


Deliver = Callable[[list[JournalEntry]], Awaitable[None] | None]


class JournalFollower:
    """Follows one unit on one host for as long as it runs, through any number of drops."""

    def __init__(
        self,
        session: HostSession,
        unit: str,
        deliver: Deliver,
        *,
        cursor: str | None = None,
        history: int = 0,
        backoff: Backoff = Backoff(initial_s=0.2, cap_s=5.0),
    ) -> None:
        self.session = session
        self.unit = unit
        self.cursor = cursor
        self._deliver = deliver
        self._history = history
        self._backoff = backoff
        self._last_seq: tuple[str, int] | None = None
        self.restarts = 0
        """How many times the stream was (re)started; for tests and diagnostics."""

    async def _emit(self, entries: list[JournalEntry]) -> None:
        if self._last_seq is not None and entries and entries[0].seq == self._last_seq:
            entries = entries[1:]  # belt and braces: never deliver the resume point twice
        if not entries:
            return
        result = self._deliver(entries)
        if result is not None:
            await result
        # Advance only after delivery: a drop before this line re-sends, never loses.
        self.cursor = entries[-1].cursor
        self._last_seq = entries[-1].seq

    async def _baseline(self) -> None:
        host = self.session.name
        if self._history > 0:
            cmd = remote.journal_read(self.unit, lines=self._history)
        else:
            cmd = remote.journal_last(self.unit)
        result = await self.session.run(cmd, check=False, timeout=30)
        entries = [e for line in result.stdout.splitlines() if (e := decode_entry(host, line))]
        if self._history > 0:
            await self._emit(entries)
        elif entries:
            self.cursor = entries[-1].cursor
            self._last_seq = entries[-1].seq
        self._history = 0

    async def run(self) -> None:
        """Follow forever (cancel the task to stop)."""
        attempt = 0
        host = self.session.name
        baseline_done = self.cursor is not None
        while True:
            await self.session.wait_connected()
            try:
                if not baseline_done:
                    await self._baseline()
                    baseline_done = True
                self.restarts += 1
                async for lines in self.session.stream(
                    remote.journal_follow(self.unit, self.cursor)
                ):
                    entries = [e for line in lines if (e := decode_entry(host, line))]
                    await self._emit(entries)
                    attempt = 0
                delay = self._backoff.delay(0)  # journalctl ended by itself: resume
            except Disconnected as exc:
                log.info("%s: journal stream interrupted: %s", host, exc)
                delay = self._backoff.delay(attempt)
            except (CommandFailed, RemoteError) as exc:
                log.warning("%s: journal stream failed: %s", host, exc)
                delay = self._backoff.delay(attempt + 2)
            attempt += 1
            await asyncio.sleep(delay)
