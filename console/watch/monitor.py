"""Live monitoring of one host: numbers, restarts and crashes, read from its journal records.

The follower delivers records; `HostMonitor` turns them into what an operator watches while
tuning: the accept length and throughput series (`console.watch.metrics`, restarted with each
service invocation), the profile's own `[[metrics]]`, the moment the service restarted,
its ready marker, and crash signatures. A crash becomes one `CrashDetected` per invocation
(a dying server logs several signature lines: the first record names the crash) that
carries the flags that invocation ran with, as `Fleet` read them from the effective unit.

Pure: no I/O (the clock aside), no Textual. Thread-safe where the TUI needs it: the engine
feeds records on its own thread while the screen reads summaries and chart series.
"""

from __future__ import annotations

import itertools
import math
import statistics
import threading
from collections import OrderedDict, deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, cast

from console.hosts.clock import SYSTEM, Clock
from console.hosts.events import (
    CrashDetected,
    InvocationChanged,
    JournalEntry,
    MetricsUpdated,
    MonitorEvent,
    ServiceReady,
    ServiceStatus,
)
from console.hosts.profiles import FlagValue, Profile
from console.watch.batches import token_usage_of
from console.watch.metrics import DEFAULT_MAXLEN, TEN_MINUTES, HostMetrics, SeriesSummary
from console.watch.restarts import RestartSummary, RestartTracker
from console.watch.sglang import (
    DecodeBatch,
    DecodeNumbers,
    PrefillBatch,
    ServerReady,
    decode_columns,
    decode_numbers,
    parse_line,
)
from console.watch.signatures import CustomMetrics, crash_signature
from console.watch.unit_starts import UnitStarts

CRASH_HISTORY = 100
"""Crash events kept per host."""
FLAGS_KEPT = 32
"""Invocations whose flag values are remembered per host."""
CRASH_WINDOW_S = 60.0
"""Without an invocation id, signature lines this close together are one crash."""
RHYTHM_LINES = 16
"""Decode lines whose spacing is the host's own rhythm."""
STALE_RHYTHMS = 3.0
STALE_MIN_S = 5.0
"""The last decode line is stale once older than this many of the host's own intervals, and
never sooner than this: a scheduler that logs every second and has been silent for 28 s
is wedged; one that logs every 20 s is not late after 25."""


@dataclass(frozen=True)
class Freshness:
    """How old the newest decode line is, against the host's usual spacing of them."""

    age_s: float
    rhythm_s: float | None
    """The median interval of the recent decode lines; None with fewer than two."""

    @property
    def stale(self) -> bool:
        rhythm = self.rhythm_s if self.rhythm_s is not None else STALE_MIN_S
        return self.age_s > max(STALE_MIN_S, STALE_RHYTHMS * rhythm)


class HostMonitor:
    """Everything the console derives from one host's journal records."""

    def __init__(
        self, profile: Profile, *, maxlen: int = DEFAULT_MAXLEN, clock: Clock = SYSTEM
    ) -> None:
        self.host = profile.name
        self.clock = clock
        """Our time, against which the age of the newest decode line is judged."""
        self.metrics = HostMetrics(profile.name, maxlen=maxlen)
        self.custom = CustomMetrics(profile.metrics)
        self.crashes: deque[CrashDetected] = deque(maxlen=CRASH_HISTORY)
        self._flags: OrderedDict[str, dict[str, FlagValue]] = OrderedDict()
        self._clock_offset = 0.0
        self._newest = 0.0
        self.restarts = RestartTracker()
        self._decodes: deque[float] = deque(maxlen=RHYTHM_LINES)
        """Host-clock times of this run's newest decode lines."""
        self._lock = threading.Lock()
        """Held while a batch is observed and while a view reads the series."""

    # --- what systemd says -------------------------------------------------------------

    def set_status(self, status: ServiceStatus) -> None:
        """Remember the flags of the invocation a status poll saw."""
        if status.error is not None or not status.invocation_id:
            return
        with self._lock:
            self.restarts.n_restarts(status.n_restarts, self.clock.time())
        if not status.flags:
            return
        flags = dict(status.flags)
        self._flags[status.invocation_id] = flags
        self._flags.move_to_end(status.invocation_id)
        while len(self._flags) > FLAGS_KEPT:
            self._flags.popitem(last=False)
        if status.invocation_id == self.metrics.invocation_id and not self.metrics.invocation_flags:
            self.metrics.invocation_flags = flags

    def earlier_starts(self, starts: UnitStarts) -> None:
        """The unit's starts systemd recorded before the console looked."""
        with self._lock:
            self.restarts.earlier(starts.starts, starts.automatic)

    def planned(self, running: bool) -> None:
        """A change of this console began or ended on the host: its restarts are no crash
        loop (console/watch/restarts.py)."""
        with self._lock:
            self.restarts.planning(running, self.clock.time())

    def flags_for(self, invocation: str | None) -> dict[str, FlagValue] | None:
        return None if invocation is None else self._flags.get(invocation)

    # --- what the journal says ---------------------------------------------------------

    def observe(
        self, records: Iterable[JournalEntry], *, live: bool = True, read_back: bool = False
    ) -> list[MonitorEvent]:
        """Feed one delivered batch; the events it produces, in journal order.

        `live` False: history from before now (the start-up read, or `read_back`: lines logged
        while the host was idle); its crashes and restarts are marked so nothing acts on them
        as if they had just happened."""
        with self._lock:
            return self._observe(records, live, read_back)

    def _observe(
        self, records: Iterable[JournalEntry], live: bool, read_back: bool = False
    ) -> list[MonitorEvent]:
        events: list[MonitorEvent] = []
        values: dict[str, float] = {}
        newest: JournalEntry | None = None
        metrics = self.metrics
        custom: CustomMetrics | None = None
        if len(self.custom):
            records = records if isinstance(records, list | tuple) else list(records)
            if self.custom.may_match([record.message for record in records]):
                custom = self.custom
        # A slice's decode lines go to the series together (`_record_decodes`), before anything
        # else that touches the series or `values` (a restart, another parsed line, a match).
        stamps: list[float] = []
        decoded: list[str] = []
        """The texts of the decode lines not yet recorded (read together when they are)."""
        for record in records:
            newest = record
            invocation = record.invocation
            if invocation is not None and invocation != metrics.invocation_id:
                if stamps:
                    self._record_decodes(stamps, decoded, values)
                    stamps, decoded = [], []
                previous = metrics.invocation_id
                self.restarts.invocation(invocation, record.timestamp, first=previous is None)
                self._decodes.clear()
                metrics.new_invocation(
                    invocation, self._flags.get(invocation), now=record.timestamp
                )
                if previous is not None:
                    events.append(
                        InvocationChanged(
                            self.host, invocation, previous, record.timestamp, read_back
                        )
                    )
            if record.dropped:
                continue
            text = record.text
            if "Decode batch" in text and "\x1b" not in text:
                # What parse_line does for these, without building the DecodeBatch.
                stamps.append(record.timestamp)
                decoded.append(text)
            else:
                if stamps:
                    self._record_decodes(stamps, decoded, values)
                    stamps, decoded = [], []
                parsed = parse_line(text)
                if isinstance(parsed, DecodeBatch):
                    self._decodes.append(record.timestamp)
                if parsed is not None and metrics.observe(parsed, record.timestamp):
                    values.update(_numbers(parsed))
                elif isinstance(parsed, ServerReady):
                    events.append(ServiceReady(self.host, invocation, record.timestamp))
            if custom is not None:
                matches = custom.match(record.message)
                if matches:
                    if stamps:
                        self._record_decodes(stamps, decoded, values)
                        stamps, decoded = [], []
                    metrics.observe_custom(matches, record.timestamp)
                    values.update(matches)
            if record.crash is not None:
                crash = self._crash(record, live, read_back)
                if crash is not None:
                    events.append(crash)
        if stamps:
            self._record_decodes(stamps, decoded, values)
        if newest is not None:
            self._newest = max(self._newest, newest.timestamp)
            if live:
                # Windows are read in the host's clock: track how far it is from ours.
                self._clock_offset = newest.timestamp - self.clock.time()
        if values:
            events.append(MetricsUpdated(self.host, self._newest, values, graph=metrics.graph))
        return events

    def _record_decodes(
        self, stamps: list[float], texts: list[str], values: dict[str, float]
    ) -> None:
        """Decode lines' numbers into the series, and the newest of each into `values`
        (a line with no field at all is no sample); the KV cache's share from the newest line
        only (`token_usage`: the host detail's, not a series)."""
        usage = token_usage_of(texts[-1])
        if usage is not None and math.isfinite(usage):
            values["token_usage"] = usage
        columns = decode_columns(texts)
        if columns is not None and self.metrics.observe_decode_columns(stamps, columns):
            self._decodes.extend(stamps)
            last = (
                columns.gen_throughput[-1],
                columns.running_req[-1],
                columns.queue_req[-1],
                columns.accept_len[-1],
                columns.accept_rate[-1],
                None,
                None,
            )
            _decode_values(values, last)  # the newest line has all five
            return
        read = [decode_numbers(text) for text in texts]
        decoded: Sequence[DecodeNumbers]
        if None in read:
            kept = [(t, n) for t, n in zip(stamps, read, strict=True) if n is not None]
            stamps, decoded = [t for t, _ in kept], [n for _, n in kept]
            if not decoded:
                return
        else:
            decoded = cast(Sequence[DecodeNumbers], read)
        self._decodes.extend(stamps)
        recorded = self.metrics.observe_decodes(stamps, decoded)
        if len(recorded) == 1:
            _decode_values(values, recorded[0])
            return
        newest: list[Any] = [None] * 5
        for numbers in reversed(recorded):  # usually the last line has all five
            for i in range(5):
                if newest[i] is None:
                    newest[i] = numbers[i]
            if None not in newest:
                break
        gen, running, queue, accept_len, accept_rate = newest
        _decode_values(values, (gen, running, queue, accept_len, accept_rate, None, None))

    def _crash(self, record: JournalEntry, live: bool, read_back: bool) -> CrashDetected | None:
        signature = record.crash
        assert signature is not None
        last = self.crashes[-1] if self.crashes else None
        if last is not None:
            if record.invocation is not None and last.invocation == record.invocation:
                return None  # the same run dying: its first signature record named it
            if record.invocation is None and record.timestamp - last.timestamp < CRASH_WINDOW_S:
                return None
        line = next((ln for ln in record.lines if crash_signature(ln) == signature), None)
        crash = CrashDetected(
            host=self.host,
            invocation=record.invocation,
            signature=signature,
            first_line=record.message,
            line=line or record.message,
            flags=self.flags_for(record.invocation),
            timestamp=record.timestamp,
            cursor=record.cursor,
            live=live,
            read_back=read_back,
        )
        self.crashes.append(crash)
        return crash

    def resolve_flags(self, crash: CrashDetected, flags: dict[str, FlagValue]) -> CrashDetected:
        """The crash with the flags read after it (its invocation was never seen running)."""
        resolved = CrashDetected(**{**crash.__dict__, "flags": dict(flags)})
        for i, kept in enumerate(self.crashes):
            if kept is crash:
                self.crashes[i] = resolved
        return resolved

    # --- what the views read -----------------------------------------------------------

    def now(self) -> float:
        """The host's present time, for the windows: our clock plus the host's offset."""
        return max(self.clock.time() + self._clock_offset, self._newest)

    def freshness(self) -> Freshness | None:
        """The age of this run's newest decode line; None before its first one."""
        with self._lock:
            if not self._decodes:
                return None
            times = list(self._decodes)
            gaps = [b - a for a, b in itertools.pairwise(times) if b >= a]
            rhythm = statistics.median(gaps) if gaps else None
            return Freshness(max(0.0, self.now() - times[-1]), rhythm)

    def restart_summary(self) -> RestartSummary:
        with self._lock:
            return self.restarts.summary(self.now())

    def summary(self, name: str) -> SeriesSummary:
        """Last minute, last ten minutes and this invocation of one series."""
        with self._lock:
            return self.metrics.summary(name, self.now())

    def recent(
        self, name: str, seconds: float = TEN_MINUTES, newest: int | None = None
    ) -> list[float]:
        """The values of one series over the last `seconds` (at most the `newest` of them),
        oldest first (for charts)."""
        with self._lock:
            series = self.metrics.series(name)
            if series is None:
                return []
            samples = series.samples(since=self.now() - seconds, newest=newest)
            return [value for _, value in samples]


def _numbers(parsed: object) -> dict[str, float]:
    values: dict[str, float] = {}
    if isinstance(parsed, DecodeBatch):
        numbers = (
            parsed.gen_throughput,
            parsed.running_req,
            parsed.queue_req,
            parsed.accept_len,
            parsed.accept_rate,
            parsed.graph_backend,
            parsed.graph,
        )
        _decode_values(values, numbers)
    elif isinstance(parsed, PrefillBatch) and parsed.input_throughput is not None:
        values["input_throughput"] = parsed.input_throughput
    return values


def _decode_values(values: dict[str, float], numbers: DecodeNumbers) -> None:
    """A decode line's numbers into `values` (what MetricsUpdated carries), in order."""
    gen, running, queue, accept_len, accept_rate, _, _ = numbers
    # Unrolled, like HostMetrics.observe_decode: once per decode line.
    if gen is not None:
        values["gen_throughput"] = float(gen)
    if running is not None:
        values["running_req"] = float(running)
    if queue is not None:
        values["queue_req"] = float(queue)
    if accept_len is not None:
        values["accept_len"] = float(accept_len)
    if accept_rate is not None:
        values["accept_rate"] = float(accept_rate)
