"""HostMonitor: numbers, restarts and crash alerts from journal records, checked by hand."""

from __future__ import annotations

import statistics
import threading
from pathlib import Path

from console.hosts.events import (
    CrashDetected,
    InvocationChanged,
    JournalEntry,
    MetricsUpdated,
    ServiceReady,
    ServiceStatus,
)
from console.hosts.profiles import Profile, parse_profile
from console.watch.monitor import HostMonitor

RUN_A, RUN_B = "a" * 32, "b" * 32
T0 = 1_767_225_600.0
RECENT_AL = r"DDTREE metrics: .*recent_al=(?P<value>[\d.]+)"
HEAD = "[2026-01-01 00:00:01 TP0] Scheduler hit an exception: Traceback (most recent call last):"


def profile() -> Profile:
    return parse_profile(
        {
            "name": "b300",
            "ssh": {"host": "10.0.0.5"},
            "service": {"unit": "sglang.service"},
            "metrics": [{"name": "ddtree_recent_al", "regex": RECENT_AL}],
        },
        Path("b300.toml"),
    )


def decode(accept: float, tps: float, graph: bool = True) -> str:
    return (
        f"[2026-01-01 00:00:00 TP0] Decode batch, #running-req: 8, #token: 9000, "
        f"token usage: 0.01, accept len: {accept:.2f}, accept rate: 0.40, "
        f"cuda graph: {graph}, gen throughput (token/s): {tps:.2f}, #queue-req: 1, "
    )


def record(
    message: str,
    ts: float,
    invocation: str | None = RUN_A,
    continuation: tuple[str, ...] = (),
    crash: str | None = None,
) -> JournalEntry:
    return JournalEntry(
        host="b300",
        cursor=f"c{ts}",
        timestamp=ts,
        message=message,
        invocation=invocation,
        continuation=continuation,
        crash=crash,
    )


def test_decode_lines_feed_the_series_and_the_event() -> None:
    monitor = HostMonitor(profile())
    accepts = [4.36, 4.50, 4.12, 5.02]
    events = monitor.observe([record(decode(a, 1600 + i), T0 + i) for i, a in enumerate(accepts)])
    (update,) = events
    assert isinstance(update, MetricsUpdated)
    assert update.values["accept_len"] == 5.02 and update.values["gen_throughput"] == 1603.0
    assert update.graph is True and update.timestamp == T0 + 3
    assert update.values["token_usage"] == 0.01  # the KV cache's share, the newest line's
    run = monitor.metrics.invocation_stats("accept_len")
    assert run is not None
    assert run.count == 4
    assert run.mean == sum(accepts) / 4
    assert run.p50 == statistics.median(accepts) == (4.36 + 4.50) / 2
    assert (run.min, run.max, run.last) == (4.12, 5.02, 5.02)
    # Windows are read in the host's clock (a live batch tells us where it is).
    minute = monitor.summary("accept_len").minute
    assert minute is not None and minute.count == 4 and minute.mean == run.mean
    assert monitor.recent("accept_len") == accepts
    assert monitor.recent("accept_len", newest=2) == accepts[-2:]  # a chart's width


def test_replayed_history_counts_for_the_run_but_not_for_the_last_minute() -> None:
    monitor = HostMonitor(profile())
    monitor.observe([record(decode(4.0, 800), T0 - 3600)], live=False)  # an hour-old line
    assert monitor.summary("accept_len").minute is None
    run = monitor.summary("accept_len").invocation
    assert run is not None and run.mean == 4.0


def test_custom_metrics_are_charted_too() -> None:
    monitor = HostMonitor(profile())
    (update,) = monitor.observe(
        [record("[2026-01-01 00:00:00 TP0] DDTREE metrics: budget=8 recent_al=4.40", T0)]
    )
    assert isinstance(update, MetricsUpdated)
    assert update.values == {"ddtree_recent_al": 4.4}
    assert monitor.metrics.last("ddtree_recent_al") == 4.4


def test_a_restart_resets_the_run_statistics() -> None:
    monitor = HostMonitor(profile())
    monitor.observe([record(decode(4.0, 800), T0), record(decode(6.0, 800), T0 + 1)])
    events = monitor.observe(
        [
            record("Started sglang.service.", T0 + 2, invocation=None),
            record(decode(5.0, 800), T0 + 3, invocation=RUN_B),
            record("[2026-01-01 00:00:04] The server is fired up and ready to roll!", T0 + 4,
                   invocation=RUN_B),
        ]
    )  # fmt: skip
    assert [type(e) for e in events] == [InvocationChanged, ServiceReady, MetricsUpdated]
    changed = events[0]
    assert isinstance(changed, InvocationChanged)
    assert (changed.invocation, changed.previous) == (RUN_B, RUN_A)
    run = monitor.metrics.invocation_stats("accept_len")
    assert run is not None and (run.count, run.mean) == (1, 5.0)
    summary = monitor.summary("accept_len")
    assert summary.ten_minutes == run  # the windows hold this run only
    assert summary.previous is not None and (summary.previous.count, summary.previous.mean) == (
        2,
        5.0,
    )


def test_one_crash_alert_per_run_with_that_runs_flags() -> None:
    monitor = HostMonitor(profile())
    monitor.set_status(
        ServiceStatus(host="b300", invocation_id=RUN_A, flags={"budget": 16, "cuda_graph": True})
    )
    monitor.set_status(ServiceStatus(host="b300", invocation_id=RUN_B, flags={"budget": 8}))
    head = HEAD
    fatal = "torch.AcceleratorError: CUDA error: an illegal memory access was encountered"
    events = monitor.observe(
        [
            record(head, T0, continuation=('  File "x.py", line 1', fatal),
                   crash="illegal_memory_access"),
            record("[2026-01-01 00:00:02] Received sigquit from a child process.", T0 + 1,
                   crash="sigquit"),
        ]
    )  # fmt: skip
    (crash,) = events
    assert isinstance(crash, CrashDetected)
    assert (crash.host, crash.invocation, crash.signature) == (
        "b300",
        RUN_A,
        "illegal_memory_access",
    )
    assert (crash.first_line, crash.line) == (head, fatal)
    assert crash.flags == {"budget": 16, "cuda_graph": True}
    assert crash.live and crash.cursor == f"c{T0}"
    (_, again) = monitor.observe(
        [record("RuntimeError: CUDA error: CUBLAS_STATUS_EXECUTION_FAILED", T0 + 9,
                invocation=RUN_B, crash="cublas")],
        live=False,
    )  # fmt: skip
    assert isinstance(again, CrashDetected)
    assert again.signature == "cublas" and again.flags == {"budget": 8} and not again.live
    assert list(monitor.crashes) == [crash, again]


def test_unknown_flags_are_resolved_later() -> None:
    monitor = HostMonitor(profile())
    (crash,) = monitor.observe(
        [record("[2026-01-01 00:00:00] Received sigquit", T0, invocation=RUN_B, crash="sigquit")]
    )
    assert isinstance(crash, CrashDetected) and crash.flags is None
    resolved = monitor.resolve_flags(crash, {"budget": 32})
    assert resolved.flags == {"budget": 32} and resolved.signature == "sigquit"
    assert list(monitor.crashes) == [resolved]


def test_gap_notices_are_not_numbers() -> None:
    monitor = HostMonitor(profile())
    gap = JournalEntry(host="b300", cursor="c", timestamp=T0, message="Suppressed 5", dropped=5)
    assert monitor.observe([gap]) == []


def test_views_read_while_the_engine_thread_feeds_records() -> None:
    """The TUI reads summaries and chart series on its thread while the engine's thread
    observes batches: no `deque mutated during iteration`, and the numbers add up."""
    monitor = HostMonitor(profile())
    batches = [
        [record(decode(4.0 + (i % 10) / 10, 1000.0), T0 + b + i / 1000) for i in range(200)]
        for b in range(100)
    ]
    failures: list[BaseException] = []
    done = threading.Event()

    def feed() -> None:
        try:
            for batch in batches:
                monitor.observe(batch)
        except BaseException as exc:  # reported below, on the test's thread
            failures.append(exc)
        finally:
            done.set()

    feeder = threading.Thread(target=feed)
    feeder.start()
    reads = 0
    while not done.is_set():
        monitor.summary("accept_len")
        monitor.recent("accept_len")
        reads += 1
    feeder.join()
    assert failures == [] and reads > 0
    invocation = monitor.summary("accept_len").invocation
    assert invocation is not None and invocation.count == 20_000


def test_a_slice_of_decode_lines_with_a_custom_line_among_them_keeps_journal_order() -> None:
    """The monitor records a slice's decode lines together; a custom metric line in the middle
    and the values the table shows come out as line by line."""
    monitor = HostMonitor(profile())
    lines = [record(decode(4.0 + i / 10, 800 + i), T0 + i) for i in range(5)]
    custom = record("[2026-01-01 00:00:00 TP0] DDTREE metrics: budget=8 recent_al=4.40", T0 + 5)
    more = [record(decode(5.0 + i / 10, 900 + i), T0 + 6 + i) for i in range(3)]
    (update,) = monitor.observe([*lines, custom, *more])
    assert isinstance(update, MetricsUpdated)
    assert update.values["accept_len"] == 5.2 and update.values["ddtree_recent_al"] == 4.4
    assert update.values["gen_throughput"] == 902
    assert monitor.recent("accept_len") == [4.0, 4.1, 4.2, 4.3, 4.4, 5.0, 5.1, 5.2]
    assert monitor.metrics.last("ddtree_recent_al") == 4.4
    fresh = monitor.freshness()
    assert fresh is not None and fresh.rhythm_s == 1.0


def _state(monitor: HostMonitor) -> tuple[object, ...]:
    names = ("accept_len", "accept_rate", "gen_throughput", "running_req", "queue_req")
    fresh = monitor.freshness()
    return (
        {name: monitor.recent(name) for name in names},
        {name: monitor.metrics.invocation_stats(name) for name in names},
        (monitor.metrics.graph, monitor.metrics.graph_backend, monitor.metrics.graph_ts),
        None if fresh is None else fresh.rhythm_s,
    )


def test_a_flood_slice_records_what_its_lines_one_at_a_time_record() -> None:
    """A slice of same-layout decode lines is read together (one search, columns of numbers);
    the series, the run's statistics, the graph state and the table's values are those of
    the lines observed one at a time, also with an unreadable line among them."""
    lines = [decode(4.0 + (i % 7) / 10, 800 + i, graph=i % 2 == 0) for i in range(40)]
    odd = [*lines[:20], lines[20].replace("accept len: 4.60", "accept len: inf"), *lines[21:]]
    for messages in (lines, odd):
        records = [record(message, T0 + i / 2) for i, message in enumerate(messages)]
        together, alone = HostMonitor(profile()), HostMonitor(profile())
        (update,) = together.observe(records)
        updates = [alone.observe([one]) for one in records]
        (last,) = updates[-1]
        assert isinstance(update, MetricsUpdated) and isinstance(last, MetricsUpdated)
        assert update.values == last.values
        assert _state(together) == _state(alone)
        assert len(together.recent("gen_throughput")) == len(messages)
