"""Cursor-tracked journal follower: every record of a unit exactly once, across reconnects.

The follower asks journalctl for JSON, keeps the `__CURSOR` of the last entry it delivered,
and resumes every (re)started stream with `--after-cursor`. It delivers a batch first and
only then advances the cursor, so a drop between the two re-sends rather than loses. Before
the first follow it takes a baseline cursor, so a drop before the first new line still
resumes from the right place. Torn lines at a disconnect never reach the parser (the
session drops them) and journalctl's `-- …` informational lines are skipped.

journald stores one entry per line, but a Python traceback or a `server_args=` dump is one
SGLang record: header-less lines are attached to the record before them (`RecordAssembler`).
A record is complete when the next record starts or, so the newest line is never held back,
after `FLUSH_IDLE_S` without another line. A record's cursor is that of its last line, so a
record held back at a disconnect is simply read again. The first record of a new service
invocation is marked, and journald's `Suppressed N messages` notices are kept as known gaps.
`LineFilter` is the client-side filter both front ends use (hosts may lack PCRE2 `--grep`).

Past 500 lines because the cursor, the stream, the baseline, the read-back after idle and the
assembly of records must agree on one position in the journal: exactly-once lives on their
seams.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from typing import Any

import msgspec

from console.hosts import clock as clocks
from console.hosts.events import JournalEntry
from console.transport import remote
from console.transport.ssh import Backoff, CommandFailed, Disconnected, HostSession, RemoteError
from console.watch.sglang import has_header
from console.watch.signatures import crash_signature, record_signature

log = logging.getLogger(__name__)

CLOSE_WAIT_S = 5.0
"""How long a stopping follower waits for its stream's last read and close."""

SUPPRESSED_MESSAGE_ID = "a596d6fe7bfa4994828e72309e95d61e"
FLUSH_IDLE_S = 0.1
"""A pending record is delivered after this long without another line."""
MAX_CONTINUATION = 1000
"""Header-less lines attached to one record at most; more start a new record."""
MAX_RECORD_CHARS = 256 * 1024
"""Characters in one record at most (journald splits lines at 48 KiB)."""
DELIVERY_SLICE = 256
"""Lines decoded and delivered at a time out of one read (a read is everything buffered, up to
~2 MiB or thousands of lines under a flood): a consumer's back-pressure then takes effect
within a few milliseconds of work instead of after the whole read."""

# CSI (colours, cursor moves), OSC (titles, links) and two-character escapes.
_ANSI_RE = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])")
_CONTROL_RE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
"""What may not reach a terminal: C0 controls but tab and newline (BEL, BS, CR, ESC, …), DEL
and the C1 controls (U+0080–U+009F; `\x9b` is a CSI to many terminals)."""
_TRACEBACK = "Traceback (most recent call last):"
_ABSENT: Any = msgspec.UNSET
"""MESSAGE missing altogether (an empty message), apart from null (journald cut it)."""


def decode_field(value: Any) -> str:
    """journald JSON fields are strings, byte arrays (non-UTF-8 or ANSI), null or lists."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        if all(isinstance(v, int) for v in value):
            return bytes(v & 0xFF for v in value).decode("utf-8", "replace")
        return "\n".join(decode_field(v) for v in value)
    return str(value)


class _Fields(msgspec.Struct, gc=False):
    """The fields of a `-o json` line the follower reads; msgspec skips the others unparsed.

    Typed loosely (journald writes strings, byte arrays, null or lists of those) and checked
    below, so one odd field costs a fallback, never the line.
    """

    cursor: Any = msgspec.field(name="__CURSOR", default=None)
    realtime: Any = msgspec.field(name="__REALTIME_TIMESTAMP", default=None)
    message: Any = msgspec.field(name="MESSAGE", default=_ABSENT)
    priority: Any = msgspec.field(name="PRIORITY", default=None)
    invocation: Any = msgspec.field(name="_SYSTEMD_INVOCATION_ID", default=None)
    pid: Any = msgspec.field(name="_PID", default=None)
    message_id: Any = msgspec.field(name="MESSAGE_ID", default=None)
    n_dropped: Any = msgspec.field(name="N_DROPPED", default=None)
    seqnum: Any = msgspec.field(name="__SEQNUM", default=None)
    seqnum_id: Any = msgspec.field(name="__SEQNUM_ID", default=None)


_decode_json = msgspec.json.Decoder(_Fields).decode


class _TextLine(msgspec.Struct, gc=False):
    """The same fields, typed as journald writes them for a line of text (nearly every line):
    msgspec checks the types, and a line that differs is read as `_Fields` instead."""

    cursor: str = msgspec.field(name="__CURSOR")
    realtime: str = msgspec.field(name="__REALTIME_TIMESTAMP")
    message: str = msgspec.field(name="MESSAGE")
    priority: str = msgspec.field(name="PRIORITY")
    # journalctl writes no __SEQNUM before systemd 254 (Debian 12, RHEL 9, Ubuntu 22.04):
    # required here, every line of such a host took the general path, 3x the cost.
    seqnum: str | None = msgspec.field(name="__SEQNUM", default=None)
    seqnum_id: str | None = msgspec.field(name="__SEQNUM_ID", default=None)
    invocation: str | None = msgspec.field(name="_SYSTEMD_INVOCATION_ID", default=None)
    pid: str | None = msgspec.field(name="_PID", default=None)
    message_id: str | None = msgspec.field(name="MESSAGE_ID", default=None)


_decode_text_line = msgspec.json.Decoder(_TextLine).decode


def decode_entry(host: str, line: str | bytes) -> JournalEntry | None:
    """Parse one `-o json` line, as text or as the bytes journalctl wrote (UTF-8); None for
    journalctl's `-- …` notes and blank lines."""
    # What `_decode_any` makes of a text line, with the type checks done by msgspec (a note,
    # a blank line or a torn one is no JSON object of these fields, and goes there).
    try:
        data = _decode_text_line(line)
        timestamp = int(data.realtime) / 1_000_000
        priority = int(data.priority)
        seqnum_id, seqnum = data.seqnum_id, data.seqnum
        seq = None if seqnum_id is None or seqnum is None else (seqnum_id, int(seqnum))
    except (msgspec.DecodeError, ValueError):  # and ValidationError, a DecodeError
        return _decode_any(host, line)
    if data.message_id == SUPPRESSED_MESSAGE_ID:
        return _decode_any(host, line)
    message = data.message
    # A control character reaches a JSON string only escaped (`\u001b`, `\r`) or, for DEL and
    # the C1 range, as itself: an ASCII line without a backslash or DEL has none (most lines).
    if type(line) is bytes:  # a byte's value, not a one-byte needle: 0.14 -> 0.03 µs each
        plain = line.isascii() and 92 not in line and 127 not in line  # backslash, DEL
    else:
        plain = line.isascii() and "\\" not in line and "\x7f" not in line
    if not plain and _CONTROL_RE.search(message):
        message = _CONTROL_RE.sub("", _ANSI_RE.sub("", message))
    return JournalEntry(
        host,
        data.cursor,
        timestamp,
        message,
        priority,
        data.invocation or None,
        data.pid or None,
        seq,
        0,
        (),
        False,
        crash_signature(message),
    )


def _decode_any(host: str, line: str | bytes) -> JournalEntry | None:
    """`decode_entry` of any line: fields of any type, gap notices, what is not JSON."""
    if isinstance(line, bytes):  # as the stream decoded it before it came as bytes
        line = line.decode("utf-8", "replace")
    if not line or line.startswith("-- "):
        return None
    try:
        data = _decode_json(line)
    except msgspec.ValidationError:  # JSON, but not an object
        return None
    except msgspec.DecodeError:  # not JSON
        log.warning("%s: undecodable journal line skipped: %.200r", host, line)
        return None
    cursor = data.cursor
    if type(cursor) is not str:
        return None
    raw = data.message
    # A control character reaches a JSON string only escaped (`\u001b`, `\r`) or, for DEL and
    # the C1 range, as itself: a string MESSAGE of an ASCII line without a backslash or DEL
    # has none (most lines), so only the others are searched.
    plain = False
    if type(raw) is str:
        message = raw
        plain = line.isascii() and "\\" not in line and "\x7f" not in line
    elif raw is None:
        message = "[message longer than journald shows: use `journalctl -a`]"
    else:
        message = "" if raw is _ABSENT else decode_field(raw)
    if not plain and _CONTROL_RE.search(message):  # colour codes are why journald sent bytes
        message = _CONTROL_RE.sub("", _ANSI_RE.sub("", message))
    # One try for the three numbers (not three helpers, not contextlib.suppress: every line).
    try:
        timestamp = int(data.realtime) / 1_000_000
        priority = int(data.priority)
        seq: tuple[str, int] | None = (str(data.seqnum_id), int(data.seqnum))
    except (TypeError, ValueError):
        timestamp = _micros(data.realtime)
        priority = _int(data.priority, 6)
        seq = _seq(data.seqnum_id, data.seqnum)
    if data.seqnum_id is None:
        seq = None
    dropped = 0
    if data.message_id == SUPPRESSED_MESSAGE_ID:
        with contextlib.suppress(ValueError, TypeError):
            dropped = int(decode_field(data.n_dropped) or 0)
        dropped = dropped or -1
    invocation = data.invocation
    if type(invocation) is not str:
        invocation = decode_field(invocation)
    pid = data.pid
    if type(pid) is not str:
        pid = decode_field(pid)
    return JournalEntry(
        host,
        cursor,
        timestamp,
        message,
        priority,
        invocation or None,
        pid or None,
        seq,
        dropped,
        (),
        False,
        None if dropped else crash_signature(message),
    )


def decode_lines(host: str, lines: Iterable[str | bytes]) -> list[JournalEntry]:
    """The entries among `-o json` output lines (notes and blank lines skipped)."""
    return [e for line in lines if (e := decode_entry(host, line)) is not None]


def _seq(seqnum_id: Any, seqnum: Any) -> tuple[str, int] | None:
    # Not contextlib.suppress (a context manager's calls): this runs for every line.
    try:
        return (str(seqnum_id), int(seqnum))
    except (ValueError, TypeError):
        return None


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


# --- Records ---------------------------------------------------------------------------


def starts_record(message: str) -> bool:
    """An SGLang `[ts ...]` header, or a bare Python traceback (an uncaught exception)."""
    return has_header(message) or message.startswith(_TRACEBACK)


class RecordAssembler:
    """Turns journal entries (one per line) into records, holding back only the newest one.

    A header-less line continues the pending record when it comes from the same process of
    the same invocation; anything else (another process, systemd's own lines, a gap notice)
    completes it. Also marks the first record of each new invocation.
    """

    def __init__(self) -> None:
        self._head: JournalEntry | None = None
        self._last: JournalEntry | None = None
        self._more: list[str] = []
        self._chars = 0
        self._invocation: str | None = None
        self._new_invocation = False

    @property
    def pending(self) -> bool:
        return self._head is not None

    def reset(self) -> None:
        """Forget the pending record (the stream resumes from before it and sends it again)."""
        self._head = self._last = None
        self._more = []
        self._chars = 0
        self._new_invocation = False

    def feed(self, entries: Iterable[JournalEntry]) -> list[JournalEntry]:
        """The records these entries complete, in order."""
        done: list[JournalEntry] = []
        for entry in entries:
            head = self._head
            if (
                head is not None
                and not entry.dropped
                and entry.pid == head.pid
                and entry.invocation == head.invocation
                and len(self._more) < MAX_CONTINUATION
                and self._chars + len(entry.message) <= MAX_RECORD_CHARS
                and not starts_record(entry.message)
            ):
                self._more.append(entry.message)
                self._chars += len(entry.message)
                self._last = entry
                continue
            if head is not None:
                if self._more or self._new_invocation:
                    done.append(self._complete())
                else:  # a one-line record (most of them): `_complete` would return it as is
                    done.append(head)
            self._start(entry)
        return done

    def flush(self) -> list[JournalEntry]:
        """The pending record, complete or not (the stream went quiet)."""
        return [self._complete()] if self._head is not None else []

    def _start(self, entry: JournalEntry) -> None:
        if entry.invocation is not None:
            self._new_invocation = self._invocation not in (None, entry.invocation)
            self._invocation = entry.invocation
        self._head = self._last = entry
        self._more = []
        self._chars = len(entry.message)

    def _complete(self) -> JournalEntry:
        head, last = self._head, self._last
        assert head is not None and last is not None
        record = head
        if self._more or self._new_invocation:
            more = tuple(self._more)
            record = msgspec.structs.replace(
                head,
                cursor=last.cursor,
                seq=last.seq,
                continuation=more,
                new_invocation=self._new_invocation,
                crash=record_signature((head.message, *more)) if more else head.crash,
            )
        self.reset()
        return record


def assemble(entries: Iterable[JournalEntry]) -> list[JournalEntry]:
    """All records of a finished read (the last one included)."""
    assembler = RecordAssembler()
    return assembler.feed(entries) + assembler.flush()


# --- Client-side filtering and markers -------------------------------------------------


def gap_marker(dropped: int) -> str:
    count = "some" if dropped < 0 else f"{dropped}"
    return f"── gap: journald suppressed {count} messages (rate limit) ──"


def invocation_marker(invocation: str | None) -> str:
    return f"── service restarted: invocation {(invocation or '?')[:12]} ──"


def read_back_marker(count: int) -> str:
    lines = "line" if count == 1 else "lines"
    return f"── read back {count} {lines} from while idle; live from here ──"


def display_lines(entry: JournalEntry) -> list[str]:
    """A record as a view shows it: restart marker first; a gap marker for a drop notice; the
    read-back boundary after the last record read back."""
    lines = [invocation_marker(entry.invocation)] if entry.new_invocation else []
    if entry.dropped:
        lines.append(gap_marker(entry.dropped))
    else:
        lines.extend(entry.lines)
    if entry.read_back:
        lines.append(read_back_marker(entry.read_back))
    return lines


def markers(entry: JournalEntry) -> list[str]:
    """The markers of a record a filter hides: a restart and the read-back boundary."""
    shown = [invocation_marker(entry.invocation)] if entry.new_invocation else []
    if entry.read_back:
        shown.append(read_back_marker(entry.read_back))
    return shown


class LineFilter:
    """Which records a view shows: those where any line matches any pattern.

    No patterns means every record. Gap notices and crash records always pass, and a
    restart marker (or the read-back boundary) is shown even when its record is filtered
    out: an operator must never miss those because of a filter.
    """

    def __init__(self, patterns: Iterable[str] = ()) -> None:
        self.patterns = tuple(patterns)
        compiled = []
        for pattern in self.patterns:
            try:
                compiled.append(re.compile(pattern))
            except re.error as exc:
                raise ValueError(f"{pattern!r} is not a valid regular expression: {exc}") from None
        self._regexes = tuple(compiled)

    @property
    def shows_all(self) -> bool:
        return not self._regexes

    def accepts(self, entry: JournalEntry) -> bool:
        if not self._regexes or entry.dropped or entry.crash is not None:
            return True
        for regex in self._regexes:
            search = regex.search
            if search(entry.message):
                return True
            for line in entry.continuation:
                if search(line):
                    return True
        return False

    def visible(self, entry: JournalEntry) -> list[str]:
        """The lines of `entry` to show: all of them when it passes, else only markers."""
        if self.accepts(entry):
            return display_lines(entry)
        return markers(entry)


# --- Following -------------------------------------------------------------------------

Deliver = Callable[[list[JournalEntry]], Awaitable[None] | None]
Gate = Callable[[], Awaitable[None] | None]
"""Asked before each slice of a read is decoded: an awaitable while the consumer wants the
follower to wait (back-pressure), None to go on."""


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
        flush_idle_s: float = FLUSH_IDLE_S,
        gate: Gate | None = None,
    ) -> None:
        self.session = session
        self._gate = gate
        self.unit = unit
        self.cursor = cursor
        self._deliver = deliver
        self._history = history
        self._backoff = backoff
        self._flush_idle_s = flush_idle_s
        self._last_seq: tuple[str, int] | None = None
        self._resuming = False
        self._records = RecordAssembler()
        self.replaying = False
        """True while the history read (`history` lines before the follow) is delivered, or
        the lines logged while the host was idle are read back."""
        self.reading_back = False
        """True while the lines logged while the host was idle are read back."""
        self._read_back_due = False
        self.restarts = 0
        """How many times the stream was (re)started; for tests and diagnostics."""

    def _decode(self, lines: list[str] | list[bytes]) -> list[JournalEntry]:
        entries = decode_lines(self.session.name, lines)
        if self._resuming and entries:
            self._resuming = False
            if entries[0].seq is not None and entries[0].seq == self._last_seq:
                entries = entries[1:]  # belt and braces: never deliver the resume point twice
        return entries

    async def _emit(self, records: list[JournalEntry]) -> None:
        if not records:
            return
        result = self._deliver(records)
        if result is not None:
            await result
        # Advance only after delivery: a drop before this line re-sends, never loses.
        self.cursor = records[-1].cursor
        self._last_seq = records[-1].seq

    async def _baseline(self) -> None:
        if self._history > 0:
            cmd = remote.journal_read(self.unit, lines=self._history)
        else:
            cmd = remote.journal_last(self.unit)
        result = await self.session.run(cmd, check=False, timeout=30)
        entries = self._decode(result.stdout.splitlines())
        if self._history > 0:
            self.replaying = True
            try:
                await self._emit(self._records.feed(entries) + self._records.flush())
            finally:
                self.replaying = False
        elif entries:
            self._records.feed(entries[-1:])  # knows the running invocation; never delivered
            self._records.reset()
            self.cursor = entries[-1].cursor
            self._last_seq = entries[-1].seq
        self._history = 0

    def going_idle(self) -> None:
        """The host is being closed on purpose (on-demand mode): when it is opened again, what
        it logged meanwhile is read back first, marked as such, before the live follow."""
        self._read_back_due = self.cursor is not None

    async def _read_back(self) -> None:
        """Everything after the cursor, up to now (journalctl without `-f`), as read-back
        batches; the last record carries the count (the view's boundary marker).

        Interrupted, the cursor stays at the last record delivered and the next connection
        reads back the rest."""
        stream: AsyncIterator[list[str]] = self.session.stream(
            remote.journal_read(self.unit, after_cursor=self.cursor, fields=remote.FOLLOW_FIELDS)
        )
        self._resuming = True
        self.replaying = self.reading_back = True
        count = 0
        try:
            async for lines in stream:
                for start in range(0, len(lines), DELIVERY_SLICE):
                    if self._gate is not None and (wait := self._gate()) is not None:
                        await wait
                    piece = lines[start : start + DELIVERY_SLICE]
                    records = self._records.feed(self._decode(piece))
                    count += sum(1 + len(r.continuation) for r in records)
                    await self._emit(records)
            last = self._records.flush()
            if last:
                count += 1 + len(last[0].continuation)
                await self._emit([msgspec.structs.replace(last[0], read_back=count)])
            self._read_back_due = False
        finally:
            self.replaying = self.reading_back = False

    async def _follow(self) -> None:
        """One journalctl stream, until it ends or fails; flushes a quiet pending record."""
        stream: AsyncIterator[list[bytes]] = self.session.stream_bytes(
            remote.journal_follow(self.unit, self.cursor)
        )
        self._resuming = True
        # The read stays in flight across idle timeouts: cancelling it would close the stream.
        reading = asyncio.ensure_future(anext(stream))
        try:
            while True:
                idle = self._flush_idle_s if self._records.pending else None
                done, _ = await asyncio.wait({reading}, timeout=idle)
                if not done:
                    await self._emit(self._records.flush())
                    continue
                try:
                    lines = reading.result()
                except StopAsyncIteration:
                    return
                reading = asyncio.ensure_future(anext(stream))
                for start in range(0, len(lines), DELIVERY_SLICE):
                    if self._gate is not None and (wait := self._gate()) is not None:
                        await wait
                    piece = lines[start : start + DELIVERY_SLICE]
                    await self._emit(self._records.feed(self._decode(piece)))
        finally:
            reading.cancel()
            # Bounded: a read cancelled while asyncssh opens its channel on a connection being
            # torn down can stay pending for good, and a stop must not wait on it.
            await asyncio.wait({reading}, timeout=CLOSE_WAIT_S)
            if reading.done() and not reading.cancelled():
                reading.exception()  # retrieved: a read that failed as it was cancelled
            aclose = getattr(stream, "aclose", None)  # ends the remote journalctl now
            if aclose is not None and reading.done():
                with contextlib.suppress(Exception):
                    async with asyncio.timeout(CLOSE_WAIT_S):
                        await aclose()

    async def run(self) -> None:
        """Follow forever (cancel the task to stop)."""
        attempt = 0
        host = self.session.name
        baseline_done = self.cursor is not None
        while True:
            await self.session.wait_connected(timeout=3600 * 24 * 365)
            self._records.reset()  # whatever was held back is read again from the cursor
            try:
                if not baseline_done:
                    await self._baseline()
                    baseline_done = True
                if self._read_back_due:
                    await self._read_back()
                self.restarts += 1
                await self._follow()
                attempt = 0
                delay = self._backoff.delay(0)  # journalctl ended by itself: resume
            except Disconnected as exc:
                log.info("%s: journal stream interrupted: %s", host, exc)
                delay = self._backoff.delay(attempt)
            except (CommandFailed, RemoteError) as exc:
                log.warning("%s: journal stream failed: %s", host, exc)
                delay = self._backoff.delay(attempt + 2)
            attempt += 1
            await clocks.sleep(self.session.clock, delay)
