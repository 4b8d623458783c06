"""Per-host rolling series of the numbers an operator tunes by, and their statistics.

Tuning speculative decoding is a comparison: accept length and throughput now, against a minute
ago, against the run before the last restart. This module keeps, for each host, bounded series of
`(timestamp, value)` samples fed from parsed SGLang lines (and from a profile's own
`[[metrics]]`), and answers last / mean / p50 / min / max / count over the last minute and the
last ten minutes *of the current service invocation*, the whole current invocation, and the
previous one. The windows never reach back past a restart: a ten-minute max that came from the
rolled-back run before it (budget 32's garbage at accept 6.68) is exactly the blend this avoids.

Bounded by construction: a console left open for a week holds at most `maxlen` samples per
series. Time is always passed in (`ts`, `now`) and never read from the clock, so the whole module
is deterministic under test and works the same when replaying an old journal.

Pure: no I/O, no Textual.

Past 500 lines because the series, their windows and the runs of each configuration are one
store fed on the hot path; the windows' statistics are computed where the samples are, never
copied out.
"""

from __future__ import annotations

import math
import statistics
from array import array
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import chain, islice
from types import MappingProxyType

from console.watch.sglang import (
    DecodeBatch,
    DecodeColumns,
    DecodeNumbers,
    ParsedLine,
    PrefillBatch,
)

_isfinite = math.isfinite

__all__ = [
    "BUILTIN_SERIES",
    "DEFAULT_MAXLEN",
    "MINUTE",
    "TEN_MINUTES",
    "HostMetrics",
    "Series",
    "SeriesSummary",
    "Stats",
]

DEFAULT_MAXLEN = 20_000
"""Samples kept per series: at SGLang's default of one decode line every 40 iterations, hours."""
MINUTE = 60.0
TEN_MINUTES = 600.0
MAX_CONFIGURATIONS = 32
"""Flag sets whose runs are remembered per host for the per-configuration row."""
MAX_RUNS_PER_CONFIGURATION = 64


def _flags_key(flags: Mapping[str, object]) -> str:
    return " ".join(f"{k}={flags[k]}" for k in sorted(flags))


BUILTIN_SERIES = (
    "accept_len",
    "accept_rate",
    "gen_throughput",
    "running_req",
    "queue_req",
    "input_throughput",
)
"""Series `HostMetrics.observe` feeds: `input_throughput` from prefill lines, the rest decode."""
_DECODE_SERIES = ("gen_throughput", "running_req", "queue_req", "accept_len", "accept_rate")
"""The series of `DecodeNumbers`' first five fields, in that order."""


@dataclass(frozen=True, slots=True)
class Stats:
    """Summary of the samples in one window. Only built from at least one sample."""

    count: int
    last: float
    """The most recently appended sample (arrival order, which is journal order)."""
    mean: float
    p50: float
    min: float
    max: float

    @classmethod
    def of(cls, values: Sequence[float]) -> Stats | None:
        """Statistics of `values` in arrival order; None when there are none."""
        if not values:
            return None
        return cls(
            count=len(values),
            last=values[-1],
            mean=math.fsum(values) / len(values),
            p50=statistics.median(values),
            min=min(values),
            max=max(values),
        )


def pool_stats(runs: Sequence[Stats]) -> Stats | None:
    """One summary over several runs, oldest first: count, mean, min, max and last exactly;
    p50 is the median of the runs' medians (the samples themselves are gone)."""
    if not runs:
        return None
    count = sum(r.count for r in runs)
    return Stats(
        count=count,
        last=runs[-1].last,
        mean=math.fsum(r.mean * r.count for r in runs) / count,
        p50=statistics.median(r.p50 for r in runs),
        min=min(r.min for r in runs),
        max=max(r.max for r in runs),
    )


@dataclass(frozen=True, slots=True)
class SeriesSummary:
    """The windows the console shows side by side for one series; none mixes invocations."""

    minute: Stats | None
    """The last minute of the current invocation."""
    ten_minutes: Stats | None
    """The last ten minutes of the current invocation."""
    invocation: Stats | None
    previous: Stats | None = None
    """The whole invocation before the current one (the last one that logged a sample)."""
    configuration: Stats | None = None
    """Every invocation this console saw run the current flag values, this one included."""
    configuration_runs: int = 0
    """How many invocations `configuration` pools."""


class Series:
    """One bounded series of `(ts, value)` samples in arrival order.

    Time windows assume samples arrive in time order, as journal entries do: a window is read
    backwards from the newest sample and stops at the first one older than it.

    The current invocation's count, mean, min, max and last are exact however long it runs,
    from running totals; its p50 is the median of the samples still retained, which is all of
    them unless the invocation outgrew `maxlen`.
    """

    __slots__ = (
        "_inv_cache",
        "_inv_count",
        "_inv_last",
        "_inv_max",
        "_inv_min",
        "_inv_sum",
        "_maxlen",
        "_next",
        "_previous",
        "_ts",
        "_values",
    )

    def __init__(self, maxlen: int = DEFAULT_MAXLEN) -> None:
        if maxlen < 1:
            raise ValueError(f"maxlen must be at least 1, not {maxlen}")
        # Two arrays of doubles used as one ring (16 bytes a sample, where a deque of
        # `(ts, value)` tuples took ~90): a fleet of streaming hosts keeps five full series
        # each. They grow to `maxlen`, then `_next` is where the oldest sample is replaced.
        self._maxlen = maxlen
        self._ts = array("d")
        self._values = array("d")
        self._next = 0
        self._inv_count = 0
        self._previous: Stats | None = None
        self.reset_invocation()

    def reset_invocation(self) -> None:
        """Start the invocation totals afresh; the finished one's become `previous()` (unless it
        logged nothing, like a run that died in graph capture). Retained samples stay, for
        charts; the windows of `nested_windows(..., current=True)` stop at this point."""
        if self._inv_count:
            self._previous = self.invocation()
        self._inv_count = 0
        self._inv_sum = 0.0
        self._inv_min = math.inf
        self._inv_max = -math.inf
        self._inv_last = math.nan
        self._inv_cache: Stats | None = None

    @property
    def maxlen(self) -> int:
        return self._maxlen

    def __len__(self) -> int:
        return len(self._ts)

    def append(self, ts: float, value: float) -> bool:
        """Record a sample; non-finite values are dropped (False), so stats stay meaningful."""
        if not (_isfinite(value) and _isfinite(ts)):
            return False
        if len(self._ts) < self._maxlen:
            self._ts.append(ts)
            self._values.append(value)
        else:
            at = self._next
            self._ts[at] = ts
            self._values[at] = value
            self._next = at + 1 if at + 1 < self._maxlen else 0
        self._inv_count += 1
        self._inv_sum += value
        # Comparisons, not min()/max(): five series take every decode line of a flood.
        if value < self._inv_min:
            self._inv_min = value
        if value > self._inv_max:
            self._inv_max = value
        self._inv_last = value
        self._inv_cache = None
        return True

    def extend(self, ts: Sequence[float], values: Sequence[float], *, finite: bool = False) -> bool:
        """Record many samples in order, as `append` one by one would; False (nothing
        recorded) when any time or value is not finite: append those one by one instead.
        `finite`: the caller has checked that every time and value is finite.

        A journal slice's decode lines go in at once: one ring write and one update of the
        running totals, not five `append` calls a line."""
        n = len(values)
        if n != len(ts):
            raise ValueError(f"{len(ts)} times for {n} values")
        if not n:
            return True
        if not finite and not (all(map(_isfinite, values)) and all(map(_isfinite, ts))):
            return False
        maxlen, times, kept = self._maxlen, self._ts, self._values
        done = 0
        room = maxlen - len(times)
        if room > 0:
            done = min(room, n)
            times.extend(ts[:done])
            kept.extend(values[:done])
        at = self._next
        while done < n:  # the ring is full: overwrite from `_next` on, wrapping at the end
            k = min(n - done, maxlen - at)
            times[at : at + k] = array("d", ts[done : done + k])
            kept[at : at + k] = array("d", values[done : done + k])
            done += k
            at = at + k if at + k < maxlen else 0
        self._next = at
        self._inv_count += n
        self._inv_sum = sum(values, self._inv_sum)  # left to right, as `append` adds
        low, high = min(values), max(values)
        if low < self._inv_min:
            self._inv_min = low
        if high > self._inv_max:
            self._inv_max = high
        self._inv_last = values[-1]
        self._inv_cache = None
        return True

    def _newest_first(self) -> Iterator[tuple[float, float]]:
        """`(ts, value)` from the newest sample back to the oldest."""
        ts, values, split = self._ts, self._values, self._next
        return chain(
            zip(reversed(ts[:split]), reversed(values[:split]), strict=True),
            zip(reversed(ts[split:]), reversed(values[split:]), strict=True),
        )

    @property
    def last(self) -> tuple[float, float] | None:
        """The newest `(ts, value)`, whatever invocation it belongs to."""
        if not self._ts:
            return None
        at = self._next - 1  # -1: the array's end, before the ring has wrapped
        return self._ts[at], self._values[at]

    def samples(
        self, since: float | None = None, newest: int | None = None
    ) -> list[tuple[float, float]]:
        """Retained `(ts, value)` samples, oldest first; only those with `ts >= since` if given,
        and only the `newest` of those if given (a chart's width, not a flood's 20,000)."""
        newest_first = []
        for sample in islice(self._newest_first(), newest):
            if since is not None and sample[0] < since:
                break
            newest_first.append(sample)
        newest_first.reverse()
        return newest_first

    def window_values(self, now: float, seconds: float) -> list[float]:
        """Values with `now - seconds <= ts <= now`, in arrival order."""
        return self.nested_windows(now, seconds, seconds)[1]

    def nested_windows(
        self, now: float, short: float, long: float, *, current: bool = False
    ) -> tuple[list[float], list[float]]:
        """`window_values` of a short and a long window ending at `now`, in one pass; with
        `current`, only samples of the current invocation (the newest `_inv_count`)."""
        short_cutoff, long_cutoff = now - short, now - long
        newest_first: list[float] = []
        short_count: int | None = None
        limit = min(self._inv_count, len(self._ts)) if current else None
        for ts, value in islice(self._newest_first(), limit):
            if ts > now:
                continue
            if ts < long_cutoff:
                break
            if short_count is None and ts < short_cutoff:
                short_count = len(newest_first)
            newest_first.append(value)
        if short_count is None:
            short_count = len(newest_first)
        newest_first.reverse()
        return newest_first[len(newest_first) - short_count :], newest_first

    def window(self, now: float, seconds: float) -> Stats | None:
        """Statistics over the last `seconds` before `now`."""
        return Stats.of(self.window_values(now, seconds))

    def previous(self) -> Stats | None:
        """Statistics of the invocation before the current one that logged a sample."""
        return self._previous

    def invocation(self) -> Stats | None:
        """Statistics since the last `reset_invocation` (or since the series began)."""
        if self._inv_count == 0:
            return None
        if self._inv_cache is None:
            retained = min(self._inv_count, len(self._ts))
            tail = [value for _, value in islice(self._newest_first(), retained)]
            self._inv_cache = Stats(
                count=self._inv_count,
                last=self._inv_last,
                mean=self._inv_sum / self._inv_count,
                p50=statistics.median(tail),
                min=self._inv_min,
                max=self._inv_max,
            )
        return self._inv_cache


class HostMetrics:
    """Every series of one host, the CUDA-graph state, and the current service invocation.

    Feed it `parse_line` results with `observe` and a profile's custom matches with
    `observe_custom`; call `new_invocation` when the unit's InvocationID changes (a restart),
    so "this run" statistics compare one configuration, not a blend.

    Under DP attention every DP group prints its own decode line; their samples share one
    series, so `mean` of `gen_throughput` is per group, not the host total.
    """

    def __init__(self, host: str = "", *, maxlen: int = DEFAULT_MAXLEN) -> None:
        self.host = host
        self._maxlen = maxlen
        self._series: dict[str, Series] = {name: Series(maxlen) for name in BUILTIN_SERIES}
        self.invocation_id: str | None = None
        self.invocation_flags: Mapping[str, object] = MappingProxyType({})
        self.invocation_started: float | None = None
        self.previous_invocation_id: str | None = None
        """The run before this one that logged numbers (what "previous run" stats are of)."""
        self.previous_flags: Mapping[str, object] = MappingProxyType({})
        self._finished: dict[str, dict[str, list[Stats]]] = {}
        """Flag values (as text) → series → the finished invocations' statistics."""
        self.graph: bool | None = None
        """Whether the newest decode batch of this invocation ran in a device graph."""
        self.graph_backend: str | None = None
        """`"cuda"`, `"npu"`... as that line printed it."""
        self.graph_ts: float | None = None

    @property
    def names(self) -> tuple[str, ...]:
        """Built-in series first, then custom ones in the order they were first seen."""
        return tuple(self._series)

    def series(self, name: str) -> Series | None:
        return self._series.get(name)

    def _append(self, name: str, ts: float, value: float | None) -> bool:
        if value is None:
            return False
        series = self._series.get(name)
        if series is None:
            series = self._series[name] = Series(self._maxlen)
        return series.append(ts, value)

    def observe(self, line: ParsedLine | None, ts: float) -> bool:
        """Record the numbers of one parsed line at time `ts`; True when anything was recorded."""
        if isinstance(line, DecodeBatch):
            return self.observe_decode(
                ts,
                (
                    line.gen_throughput,
                    line.running_req,
                    line.queue_req,
                    line.accept_len,
                    line.accept_rate,
                    line.graph_backend,
                    line.graph,
                ),
            )
        if isinstance(line, PrefillBatch):
            # Prefill's running/queue counts would interleave with decode's at a different
            # cadence; only its own throughput is kept.
            return self._append("input_throughput", ts, line.input_throughput)
        return False

    def observe_decode(self, ts: float, numbers: DecodeNumbers) -> bool:
        """Record one decode line's numbers (`console.watch.batches.decode_numbers`)."""
        gen, running, queue, accept_len, accept_rate, backend, graph = numbers
        # Unrolled: this runs for every decode line of a flood (five series each).
        series = self._series
        recorded = False
        if gen is not None:
            recorded = series["gen_throughput"].append(ts, gen)
        if running is not None:
            recorded = series["running_req"].append(ts, running) or recorded
        if queue is not None:
            recorded = series["queue_req"].append(ts, queue) or recorded
        if accept_len is not None:
            recorded = series["accept_len"].append(ts, accept_len) or recorded
        if accept_rate is not None:
            recorded = series["accept_rate"].append(ts, accept_rate) or recorded
        if graph is not None:
            self.graph, self.graph_backend, self.graph_ts = graph, backend, ts
            recorded = True
        return recorded

    def observe_decodes(
        self, stamps: Sequence[float], decoded: Sequence[DecodeNumbers]
    ) -> Sequence[DecodeNumbers]:
        """`observe_decode` of many decode lines (times `stamps`), in order, a series at a
        time; the numbers of the lines that recorded something (every line's, when all its
        numbers are finite: a line that has none recorded nothing and adds nothing)."""
        if not all(map(_isfinite, stamps)):
            return self._observe_each(stamps, decoded)
        columns = list(zip(*decoded, strict=True))
        if not columns:
            return decoded
        writes: list[tuple[Series, Sequence[float], Sequence[float]]] = []
        for name, column in zip(_DECODE_SERIES, columns, strict=False):
            times: Sequence[float] = stamps
            numbers: Sequence[float] = column
            if None in column:
                pairs = [(t, v) for t, v in zip(stamps, column, strict=True) if v is not None]
                if not pairs:
                    continue
                times, numbers = ([t for t, _ in pairs], [v for _, v in pairs])
            if not all(map(_isfinite, numbers)):
                return self._observe_each(stamps, decoded)
            writes.append((self._series[name], times, numbers))
        for series, times, numbers in writes:
            series.extend(times, numbers, finite=True)  # every time and number checked above
        backends, graphs = columns[5], columns[6]
        for i in range(len(graphs) - 1, -1, -1):  # the newest line that printed its graph
            if graphs[i] is not None:
                self.graph, self.graph_backend, self.graph_ts = graphs[i], backends[i], stamps[i]
                break
        return decoded

    def observe_decode_columns(self, stamps: Sequence[float], columns: DecodeColumns) -> bool:
        """`observe_decodes` of lines whose numbers are all present and finite
        (`console.watch.batches.decode_columns`), without making a tuple a line; False
        (nothing recorded) when a time is not finite: use `observe_decodes` then."""
        if not all(map(_isfinite, stamps)):
            return False
        series = self._series
        for name, numbers in (
            ("gen_throughput", columns.gen_throughput),
            ("running_req", columns.running_req),
            ("queue_req", columns.queue_req),
            ("accept_len", columns.accept_len),
            ("accept_rate", columns.accept_rate),
        ):
            series[name].extend(stamps, numbers, finite=True)
        if columns.graph:  # every line printed its graph: the newest one's
            self.graph, self.graph_backend = columns.graph[-1], columns.graph_backend
            self.graph_ts = stamps[-1]
        return True

    def _observe_each(
        self, stamps: Sequence[float], decoded: Sequence[DecodeNumbers]
    ) -> list[DecodeNumbers]:
        return [n for t, n in zip(stamps, decoded, strict=True) if self.observe_decode(t, n)]

    def observe_custom(self, matches: Iterable[tuple[str, float]], ts: float) -> None:
        """Record `CustomMetrics.match` results. Names share the built-in namespace."""
        for name, value in matches:
            self._append(name, ts, value)

    def new_invocation(
        self,
        invocation_id: str,
        flags: Mapping[str, object] | None = None,
        *,
        now: float | None = None,
    ) -> None:
        """A new run of the service began: reset its statistics and the graph state.

        `flags` (the configuration it runs with) is kept alongside, so the statistics of a run
        can be labelled with what produced them.
        """
        if any(s.invocation() is not None for s in self._series.values()):
            self.previous_invocation_id = self.invocation_id
            self.previous_flags = self.invocation_flags
            self._remember_run()
        self.invocation_id = invocation_id
        self.invocation_flags = MappingProxyType(dict(flags or {}))
        self.invocation_started = now
        self.graph = self.graph_backend = self.graph_ts = None
        for series in self._series.values():
            series.reset_invocation()

    def _remember_run(self) -> None:
        """File the finished invocation's statistics under its flags (when they are known)."""
        key = _flags_key(self.invocation_flags)
        if not key:
            return
        runs = self._finished.pop(key, {})
        self._finished[key] = runs  # most recently run last
        for name, series in self._series.items():
            stats = series.invocation()
            if stats is not None:
                kept = runs.setdefault(name, [])
                kept.append(stats)
                del kept[:-MAX_RUNS_PER_CONFIGURATION]
        while len(self._finished) > MAX_CONFIGURATIONS:
            del self._finished[next(iter(self._finished))]

    def configuration_stats(self, name: str) -> tuple[Stats | None, int]:
        """(pooled statistics, runs) of every invocation seen with the current flags."""
        key = _flags_key(self.invocation_flags)
        runs = list(self._finished.get(key, {}).get(name, [])) if key else []
        current = self.invocation_stats(name)
        if current is not None:
            runs.append(current)
        return pool_stats(runs), len(runs)

    def last(self, name: str) -> float | None:
        """The newest value of a series, None when it has none."""
        series = self._series.get(name)
        sample = None if series is None else series.last
        return None if sample is None else sample[1]

    def stats(self, name: str, now: float, seconds: float) -> Stats | None:
        """Statistics of one series over the `seconds` before `now`."""
        series = self._series.get(name)
        return None if series is None else series.window(now, seconds)

    def invocation_stats(self, name: str) -> Stats | None:
        """Statistics of one series over the current invocation."""
        series = self._series.get(name)
        return None if series is None else series.invocation()

    def summary(self, name: str, now: float) -> SeriesSummary:
        """Last minute and last ten minutes of this invocation, all of it, and the previous one."""
        series = self._series.get(name)
        if series is None:
            return SeriesSummary(None, None, None)
        minute, ten_minutes = series.nested_windows(now, MINUTE, TEN_MINUTES, current=True)
        ten = Stats.of(ten_minutes)
        configuration, runs = self.configuration_stats(name)
        # Under a flood (20,000 samples a second) both windows hold the same samples.
        return SeriesSummary(
            minute=ten if len(minute) == len(ten_minutes) else Stats.of(minute),
            ten_minutes=ten,
            invocation=series.invocation(),
            previous=series.previous(),
            configuration=configuration,
            configuration_runs=runs,
        )
