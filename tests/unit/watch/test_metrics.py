"""Rolling per-host series: time windows, percentiles, invocation resets and the memory bound."""

from __future__ import annotations

import math
import statistics

import pytest
from hypothesis import given
from hypothesis import strategies as st

from console.watch.metrics import (
    BUILTIN_SERIES,
    DEFAULT_MAXLEN,
    MINUTE,
    TEN_MINUTES,
    HostMetrics,
    Series,
    Stats,
)
from console.watch.sglang import parse_line


def decode(
    accept_len: float | None = 3.0,
    tps: float = 100.0,
    *,
    running: int = 4,
    queue: int = 0,
    graph: str = "cuda graph: True, ",
) -> str:
    spec = "" if accept_len is None else f"accept len: {accept_len:.2f}, accept rate: 0.25, "
    return (
        f"[2026-05-01 10:00:00 TP0] Decode batch, #running-req: {running}, #token: 100, "
        f"token usage: 0.10, {spec}{graph}gen throughput (token/s): {tps:.2f}, "
        f"#queue-req: {queue}"
    )


PREFILL = (
    "[2026-04-05 20:02:51] Prefill batch, #new-seq: 1, #new-token: 158, #cached-token: 0, "
    "token usage: 0.08, #running-req: 31, #queue-req: 0, cuda graph: True, "
    "input throughput (token/s): 559.53"
)


def test_stats_of() -> None:
    assert Stats.of([]) is None
    assert Stats.of([3.0, 1.0, 2.0, 10.0]) == Stats(
        count=4, last=10.0, mean=4.0, p50=2.5, min=1.0, max=10.0
    )
    assert Stats.of([7.0]) == Stats(1, 7.0, 7.0, 7.0, 7.0, 7.0)


def test_observe_decode_line() -> None:
    host = HostMetrics("b300")
    assert host.observe(parse_line(decode(4.36, 812.5, running=8, queue=2)), ts=100.0)
    assert host.last("accept_len") == 4.36
    assert host.last("accept_rate") == 0.25
    assert host.last("gen_throughput") == 812.5
    assert (host.last("running_req"), host.last("queue_req")) == (8, 2)
    assert (host.graph, host.graph_backend, host.graph_ts) == (True, "cuda", 100.0)
    assert host.last("input_throughput") is None
    assert host.names == BUILTIN_SERIES


def test_decode_without_spec_or_graph_leaves_those_alone() -> None:
    host = HostMetrics()
    host.observe(parse_line(decode(3.0)), ts=1.0)
    host.observe(parse_line(decode(None, graph="")), ts=2.0)
    series = host.series("accept_len")
    assert series is not None and len(series) == 1
    assert host.graph is True and host.graph_ts == 1.0
    gen = host.series("gen_throughput")
    assert gen is not None and len(gen) == 2


def test_graph_state_follows_the_newest_line() -> None:
    host = HostMetrics()
    host.observe(parse_line(decode(graph="cuda graph: True, ")), ts=1.0)
    host.observe(parse_line(decode(graph="npu graph: False, ")), ts=2.0)
    assert (host.graph, host.graph_backend) == (False, "npu")


def test_prefill_feeds_input_throughput_only() -> None:
    host = HostMetrics()
    assert host.observe(parse_line(PREFILL), ts=5.0)
    assert host.last("input_throughput") == 559.53
    assert host.last("running_req") is None
    assert host.graph is None  # the prefill graph is not the decode graph


def test_unrelated_lines_record_nothing() -> None:
    host = HostMetrics()
    assert not host.observe(None, ts=1.0)
    assert not host.observe(
        parse_line("[2026-08-17 16:52:40] The server is fired up and ready to roll!"), ts=1.0
    )
    assert all(host.last(name) is None for name in host.names)


def test_time_windows_are_relative_to_now() -> None:
    host = HostMetrics()
    # One sample every 10 s for 20 minutes: value = minute index, so windows are easy to read.
    for i in range(121):
        host.observe(parse_line(decode(1.0 + i // 6)), ts=1000.0 + 10 * i)
    now = 1000.0 + 1200
    minute = host.stats("accept_len", now, MINUTE)
    assert minute is not None
    assert minute.count == 7  # ts 1140 .. 1200, both ends inclusive
    assert (minute.min, minute.max, minute.last) == (20.0, 21.0, 21.0)
    ten = host.stats("accept_len", now, TEN_MINUTES)
    assert ten is not None and ten.count == 61
    assert (ten.min, ten.max) == (11.0, 21.0)
    # A `now` in the past sees only what had arrived by then.
    earlier = host.stats("accept_len", 1000.0 + 300, MINUTE)
    assert earlier is not None and (earlier.count, earlier.last) == (7, 6.0)
    # Nothing recent: no statistics rather than zeros.
    assert host.stats("accept_len", now + 3600, MINUTE) is None
    assert host.stats("no_such_series", now, MINUTE) is None


def test_percentile_and_mean() -> None:
    host = HostMetrics()
    values = [5.0, 1.0, 4.0, 2.0, 3.0, 100.0]
    for i, value in enumerate(values):
        host.observe(parse_line(decode(tps=value)), ts=float(i))
    stats = host.stats("gen_throughput", now=10.0, seconds=MINUTE)
    assert stats == Stats(6, 100.0, sum(values) / 6, 3.5, 1.0, 100.0)


def test_new_invocation_resets_run_stats_and_windows_and_keeps_the_previous_run() -> None:
    host = HostMetrics("pro6000")
    for i in range(10):
        host.observe(parse_line(decode(2.0)), ts=float(i))
    before = host.invocation_stats("accept_len")
    assert before is not None and before.count == 10

    host.new_invocation("a1b2", {"budget": 16, "cuda_graph": True}, now=10.0)
    assert (host.invocation_id, host.invocation_started) == ("a1b2", 10.0)
    assert dict(host.invocation_flags) == {"budget": 16, "cuda_graph": True}
    assert host.invocation_stats("accept_len") is None
    assert host.graph is None  # unknown until the new process logs a decode line
    assert host.summary("accept_len", now=11.0).minute is None  # nothing of this run yet

    for i in range(4):
        host.observe(parse_line(decode(5.0 + i)), ts=20.0 + i)
    run = host.invocation_stats("accept_len")
    assert run == Stats(count=4, last=8.0, mean=6.5, p50=6.5, min=5.0, max=8.0)
    window = host.stats("accept_len", now=30.0, seconds=MINUTE)
    assert window is not None and window.count == 14  # the raw window still sees both
    summary = host.summary("accept_len", now=30.0)
    assert (summary.minute, summary.ten_minutes, summary.invocation) == (run, run, run)
    assert summary.previous == before


def test_a_rolled_back_runs_numbers_stay_in_previous_run_not_in_the_windows() -> None:
    """The campaign's stats panel showed a 10-minute max of 6.68 on budget 8: it came from the
    budget-32 run just rolled back, which answered garbage."""
    host = HostMetrics("b300")
    host.new_invocation("run-b32", {"budget": 32}, now=0.0)
    for i, al in enumerate((6.1, 6.68, 6.3)):
        host.observe(parse_line(decode(al)), ts=100.0 + i)
    host.new_invocation("crashed-in-capture", {"budget": 16}, now=110.0)  # logged nothing
    host.new_invocation("run-b8", {"budget": 8}, now=120.0)
    for i, al in enumerate((4.36, 4.41, 4.38)):
        host.observe(parse_line(decode(al)), ts=130.0 + i)

    summary = host.summary("accept_len", now=140.0)

    assert summary.ten_minutes is not None and summary.ten_minutes.max == 4.41
    assert summary.minute is not None and summary.minute.count == 3
    assert summary.previous is not None and summary.previous.max == 6.68
    assert host.previous_invocation_id == "run-b32"
    assert dict(host.previous_flags) == {"budget": 32}


def test_the_configuration_row_pools_every_run_with_the_current_flags() -> None:
    host = HostMetrics("b300")
    for run, flags, values in (
        ("r1", {"budget": 8}, (4.3, 4.5)),
        ("r2", {"budget": 16}, (6.0,)),
        ("r3", {"budget": 8}, (4.4,)),
    ):
        host.new_invocation(run, flags)
        for i, value in enumerate(values):
            host.observe(parse_line(decode(value)), ts=float(i))

    pooled, runs = host.configuration_stats("accept_len")

    assert runs == 2
    assert pooled is not None and pooled.count == 3 and pooled.max == 4.5 and pooled.min == 4.3
    assert pooled.mean == pytest.approx(4.4) and pooled.last == 4.4
    summary = host.summary("accept_len", now=10.0)
    assert (summary.configuration, summary.configuration_runs) == (pooled, 2)
    host.new_invocation("r4", {})  # flags not known yet: no configuration to pool with
    assert host.configuration_stats("accept_len") == (None, 0)


def test_invocation_flags_are_a_copy() -> None:
    host = HostMetrics()
    flags: dict[str, object] = {"budget": 8}
    host.new_invocation("x", flags)
    flags["budget"] = 32
    assert host.invocation_flags["budget"] == 8
    assert host.invocation_started is None


def test_series_are_bounded() -> None:
    host = HostMetrics(maxlen=100)
    for i in range(1000):
        host.observe(parse_line(decode(float(i % 7))), ts=float(i))
    series = host.series("accept_len")
    assert series is not None
    assert len(series) == series.maxlen == 100
    assert series.samples()[0] == (900.0, 900 % 7)
    assert HostMetrics().series("accept_len") is not None
    default = Series()
    assert default.maxlen == DEFAULT_MAXLEN


def test_invocation_totals_stay_exact_past_the_bound() -> None:
    series = Series(maxlen=10)
    for i in range(100):
        series.append(float(i), float(i))
    stats = series.invocation()
    assert stats is not None
    assert (stats.count, stats.min, stats.max, stats.last) == (100, 0.0, 99.0, 99.0)
    assert stats.mean == pytest.approx(49.5)
    assert stats.p50 == 94.5  # median of the 10 samples still held


def test_invocation_stats_are_cached_until_the_next_sample() -> None:
    series = Series()
    series.append(1.0, 1.0)
    first = series.invocation()
    assert series.invocation() is first
    series.append(2.0, 3.0)
    second = series.invocation()
    assert second is not first and second is not None and second.mean == 2.0


def test_non_finite_values_are_dropped() -> None:
    series = Series()
    assert not series.append(1.0, math.nan)
    assert not series.append(1.0, math.inf)
    assert not series.append(math.nan, 1.0)
    assert len(series) == 0 and series.invocation() is None and series.last is None
    with pytest.raises(ValueError, match="maxlen"):
        Series(0)


def test_samples_since() -> None:
    series = Series()
    for i in range(5):
        series.append(float(i), float(i * i))
    assert series.samples(since=3.0) == [(3.0, 9.0), (4.0, 16.0)]
    assert series.samples() == [(float(i), float(i * i)) for i in range(5)]
    assert series.samples(newest=2) == [(3.0, 9.0), (4.0, 16.0)]
    assert series.samples(since=4.0, newest=3) == [(4.0, 16.0)]
    assert series.last == (4.0, 16.0)


def test_custom_metrics_get_their_own_series() -> None:
    host = HostMetrics()
    host.observe_custom([("ddtree_recent_al", 4.1), ("ddtree_tps", 800.0)], ts=1.0)
    host.observe_custom([("ddtree_recent_al", 4.3)], ts=2.0)
    assert host.names == (*BUILTIN_SERIES, "ddtree_recent_al", "ddtree_tps")
    stats = host.stats("ddtree_recent_al", now=2.0, seconds=MINUTE)
    assert stats is not None and stats.count == 2
    assert stats.mean == pytest.approx(4.2)
    host.new_invocation("next")
    assert host.invocation_stats("ddtree_recent_al") is None
    assert host.last("ddtree_tps") == 800.0


@given(
    st.lists(
        st.floats(min_value=-1e9, max_value=1e9, allow_nan=False),
        min_size=1,
        max_size=200,
    ),
    st.integers(min_value=1, max_value=50),
)
def test_window_matches_a_brute_force_recount(values: list[float], maxlen: int) -> None:
    series = Series(maxlen=maxlen)
    for i, value in enumerate(values):
        series.append(float(i), value)
    now = float(len(values) - 1)
    kept = values[-maxlen:]
    ts_kept = range(len(values) - len(kept), len(values))
    expected = [v for t, v in zip(ts_kept, kept, strict=True) if t >= now - 20]
    stats = series.window(now, 20.0)
    assert stats is not None
    assert (stats.count, stats.last, stats.min, stats.max) == (
        len(expected),
        expected[-1],
        min(expected),
        max(expected),
    )
    assert stats.p50 == statistics.median(expected)
    run = series.invocation()
    assert run is not None and (run.count, run.min, run.max) == (
        len(values),
        min(values),
        max(values),
    )


def test_a_wrapped_series_reads_in_arrival_order() -> None:
    """Past `maxlen` the oldest sample is replaced in place: reads still go oldest → newest."""
    series = Series(maxlen=4)
    for i in range(7):  # 0..6: 3, 4, 5, 6 are kept, the ring's seam is mid-array
        series.append(float(i), float(10 * i))
    assert series.samples() == [(3.0, 30.0), (4.0, 40.0), (5.0, 50.0), (6.0, 60.0)]
    assert series.last == (6.0, 60.0)
    assert series.samples(newest=3) == [(4.0, 40.0), (5.0, 50.0), (6.0, 60.0)]
    assert series.window_values(now=5.0, seconds=1.5) == [40.0, 50.0]  # 6.0 is after `now`
    stats = series.invocation()
    assert stats is not None and stats.p50 == 45.0 and stats.count == 7
    series.append(7.0, 70.0)  # the seam wraps back to the array's start
    assert series.samples() == [(4.0, 40.0), (5.0, 50.0), (6.0, 60.0), (7.0, 70.0)]
    assert series.last == (7.0, 70.0)


def test_nested_windows_read_both_windows_in_one_pass() -> None:
    series = Series()
    # Arrival order with a late sample (ts 95 after 150) and one from after some `now`s.
    for ts, value in [(10.0, 1.0), (95.0, 2.0), (150.0, 3.0), (95.0, 4.0), (170.0, 5.0)]:
        series.append(ts, value)
    # (now, last 60 s, last 600 s); a window stops at the first sample older than it.
    expected = [
        (100.0, [2.0, 4.0], [1.0, 2.0, 4.0]),
        (160.0, [], [1.0, 2.0, 3.0, 4.0]),
        (200.0, [5.0], [1.0, 2.0, 3.0, 4.0, 5.0]),
        (900.0, [], []),
    ]
    for now, minute, ten in expected:
        assert series.nested_windows(now, 60.0, 600.0) == (minute, ten)
        assert series.window_values(now, 60.0) == minute
        assert series.window_values(now, 600.0) == ten


def test_a_flood_summary_shares_one_window() -> None:
    host = HostMetrics()
    for i in range(1000):
        host.observe(parse_line(decode(4.0 + i % 3)), ts=1000.0 + i / 1000)
    summary = host.summary("accept_len", now=1001.0)
    assert summary.minute is summary.ten_minutes  # computed once
    assert summary.minute is not None and summary.minute.count == 1000


def _state(series: Series) -> tuple[object, ...]:
    return (
        series.samples(),
        series.last,
        series.invocation(),
        series.nested_windows(1e9, 5.0, 50.0, current=True),
    )


@given(
    st.lists(st.floats(min_value=-1e9, max_value=1e9, allow_nan=False), max_size=120),
    st.lists(st.integers(min_value=0, max_value=40), max_size=6),
    st.integers(min_value=1, max_value=50),
)
def test_extend_keeps_what_appending_one_by_one_keeps(
    values: list[float], cuts: list[int], maxlen: int
) -> None:
    """A slice at a time (across the ring's wrap, over more than `maxlen` at once) is the same
    series, totals and windows as one sample at a time."""
    one, many = Series(maxlen=maxlen), Series(maxlen=maxlen)
    stamps = [float(i) for i in range(len(values))]
    for t, v in zip(stamps, values, strict=True):
        one.append(t, v)
    start = 0
    for end in [*(min(len(values), start + cut) for cut in cuts), len(values)]:
        end = max(start, end)
        assert many.extend(stamps[start:end], values[start:end])
        start = end
    assert _state(many) == _state(one)


def test_extend_records_nothing_when_a_value_is_not_finite() -> None:
    series = Series(maxlen=10)
    assert not series.extend([1.0, 2.0], [3.0, math.inf])
    assert not series.extend([1.0, math.nan], [3.0, 4.0])
    assert len(series) == 0 and series.invocation() is None


def test_observe_decodes_matches_observe_decode_line_by_line() -> None:
    """The monitor's slice path: the same series, graph state and recorded lines, including
    lines without accept numbers, without a graph, and one whose throughput is not finite."""
    lines = [
        (1.0, (100.0, 4, 0, 3.0, 0.25, "cuda", True)),
        (2.0, (110.0, 5, 1, None, None, None, None)),
        (3.0, (120.0, 6, 0, 3.5, 0.3, "cuda", False)),
        (4.0, (None, None, None, None, None, None, None)),
    ]
    broken = [*lines, (5.0, (math.inf, 7, 0, 3.1, 0.2, None, None))]
    for batch in (lines, broken):
        one, many = HostMetrics("h", maxlen=3), HostMetrics("h", maxlen=3)
        recorded_one = [n for t, n in batch if one.observe_decode(t, n)]
        recorded_many = many.observe_decodes([t for t, _ in batch], [n for _, n in batch])
        for name in BUILTIN_SERIES:
            assert _state(many._series[name]) == _state(one._series[name]), name
        assert (many.graph, many.graph_backend, many.graph_ts) == (False, "cuda", 3.0)
        assert (one.graph, one.graph_backend, one.graph_ts) == (False, "cuda", 3.0)
        # Every line with a number recorded it (the all-None line adds nothing either way).
        assert [n for n in recorded_many if any(x is not None for x in n)] == recorded_one
