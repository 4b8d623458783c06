"""Pooled windows equal the statistics of all the samples at once; deltas are judged against
twice their standard error; a rolled-back configuration is never best."""

from __future__ import annotations

import statistics
from collections.abc import Mapping

import pytest

from console.findings.compare import Delta, best, config_key, configurations, pool
from console.ledger.ledger import Experiment, Side, WindowStats


def test_window_stats_of_samples() -> None:
    w = WindowStats.of([4.0, 4.2, 4.4, 4.6, 4.8])
    assert w is not None
    assert w.mean == pytest.approx(4.4)
    assert (w.count, w.p50, w.min, w.max) == (5, 4.4, 4.0, 4.8)
    assert w.stddev == pytest.approx(statistics.stdev([4.0, 4.2, 4.4, 4.6, 4.8]))
    assert w.p10 == pytest.approx(4.08) and w.p90 == pytest.approx(4.72)
    single = WindowStats.of([5.0])
    assert single is not None and single.stddev == 0 and single.p10 == single.p90 == 5.0
    assert WindowStats.of([]) is None


def test_pooling_two_runs_is_exactly_the_stats_of_all_their_samples() -> None:
    a, b = [4.1, 4.3, 4.4, 4.2], [5.9, 6.3, 5.5]
    pooled = pool([WindowStats.of(a), WindowStats.of(b)])  # type: ignore[list-item]
    assert pooled is not None
    assert pooled.count == 7
    assert pooled.mean == pytest.approx(statistics.fmean(a + b))
    assert pooled.stddev == pytest.approx(statistics.stdev(a + b))
    assert (pooled.min, pooled.max) == (4.1, 6.3)


def test_a_difference_inside_twice_the_standard_error_is_noise() -> None:
    near = Delta("accept_len", WindowStats.of([4.3, 4.5] * 5), WindowStats.of([4.35, 4.55] * 5))
    far = Delta("accept_len", WindowStats.of([4.3, 4.5] * 5), WindowStats.of([5.8, 6.0] * 5))
    assert near.beyond_spread is False and far.beyond_spread is True
    assert far.delta == pytest.approx(1.5)
    assert Delta("x", None, WindowStats.of([1.0])).beyond_spread is None


def _side(inv: str, flags: Mapping[str, object], tput: list[float]) -> Side:
    stats = WindowStats.of(tput)
    assert stats is not None
    return Side(inv, flags, {"gen_throughput": stats})


def test_a_rolled_back_configuration_is_never_best_even_when_fastest() -> None:
    b8, b32 = {"budget": 8}, {"budget": 32}
    garbage = Experiment(
        "b300", "u", "2026-12-03T10:00:00+00:00", "2026-12-03T10:05:00+00:00", "rolled_back",
        _side("a" * 32, b8, [1600.0, 1650.0]), _side("b" * 32, b32, [2000.0, 2100.0]),
        reason="smoke answer '¿¡' is not '4'",
    )  # fmt: skip
    configs = configurations([garbage])
    top = best(configs)
    assert top is not None and top.flags == b8
    (rolled,) = [c for c in configs if c.flags == b32]
    assert rolled.status == "rolled back: smoke answer '¿¡' is not '4'"
    assert config_key({"cuda_graph": False, "budget": 16}) == "budget=16 cuda_graph=off"


def test_what_a_rollback_gave_up_is_rolled_back_and_never_best() -> None:
    """Budget 16 passed its soak and was fastest, then `specops rollback` (or probation, on a
    crash an hour later) went back to budget 8: budget 16 is listed rolled back, not best."""
    b8, b16 = {"budget": 8}, {"budget": 16}
    change = Experiment(
        "b300", "u", "2026-12-03T10:00:00+00:00", "2026-12-03T10:05:00+00:00", "kept",
        _side("a" * 32, b8, [1600.0, 1650.0]), _side("b" * 32, b16, [2000.0, 2100.0]),
    )  # fmt: skip
    rollback = Experiment(
        "b300", "u", "2026-12-03T11:00:00+00:00", "2026-12-03T11:05:00+00:00", "kept",
        _side("b" * 32, b16, [2050.0]), _side("c" * 32, b8, [1620.0]), kind="rollback",
    )  # fmt: skip
    first, second = configurations([change, rollback])
    assert (first.flags, second.flags) == (b8, b16)
    assert second.status == "rolled back: by `specops rollback`"
    assert not first.rolled_back and first.status == "kept"
    top = best([first, second])
    assert top is not None and top.flags == b8
    by_probation = Experiment(
        **{**rollback.__dict__, "source": "probation", "cause": "illegal_memory_access"}
    )
    assert configurations([change, by_probation])[1].status == (
        "rolled back: illegal_memory_access (by probation)"
    )
    # Before any rollback, the fast kept change is best.
    top = best(configurations([change]))
    assert top is not None and top.flags == b16


def test_a_narrow_terminal_shows_the_flags_that_differ_whole_and_the_shared_ones_once() -> None:
    """Seven flags each: at 80 and 120 columns the table cut `max_running_r…`, the one flag
    that told configurations 1 and 3 apart."""
    from rich.console import Console

    from console.findings.compare_view import render_compare, split_flags

    shared = {"nvls": False, "speculative_num_steps": 5, "topk": 4, "window": 2048}
    base = {**shared, "budget": 8, "cuda_graph": True, "max_running_requests": 128}
    tried = [{}, {"budget": 16, "cuda_graph": False}, {"max_running_requests": 256}]

    def kept(i: int) -> Experiment:
        before = _side(f"{i}" * 32, {**base, **tried[i]}, [5400.0, 5500.0])
        after = _side(f"{i + 1}" * 32, {**base, **tried[i + 1]}, [5400.0, 5500.0])
        return Experiment(
            "b300", "u", f"2026-12-03T1{i}:00", f"2026-12-03T1{i}:05", "kept", before, after
        )

    experiments = [kept(0), kept(1)]
    configs = configurations(experiments)
    assert split_flags(configs) == (["budget", "cuda_graph", "max_running_requests"], shared)
    for width in (80, 120):
        console = Console(width=width, record=True, color_system=None)
        console.print(render_compare(configs, (configs[0], configs[2])))
        text = console.export_text()
        assert "…" not in text
        assert "in every configuration: nvls=off speculative_num_steps=5 topk=4 window=2048" in text
        assert "#1 → #3: max_running_requests 128 → 256" in text
        folded = "".join(line.split("│")[2].strip() for line in text.splitlines() if "│" in line)
        for value in ("max_running_requests=128", "max_running_requests=256", "budget=16"):
            assert value in folded, (width, value)


def _ran(
    n: int,
    before: Mapping[str, object],
    after: Mapping[str, object],
    outcome: str = "kept",
    **extra: object,
) -> Experiment:
    """Experiment `n`: `before` (run `n`) → `after` (run `n + 1`), 1000 tok/s × budget."""
    return Experiment(
        "b300", "u", f"2026-12-03T1{n}:00:00+00:00", f"2026-12-03T1{n}:05:00+00:00", outcome,
        _side(f"{n}" * 32, before, [100.0 * int(str(before["budget"]))] * 3),
        _side(f"{n + 1}" * 32, after, [100.0 * int(str(after["budget"]))] * 3),
        **extra,  # type: ignore[arg-type]
    )  # fmt: skip


def test_one_outcome_per_configuration_is_its_newest_verdict_and_a_crash_stays() -> None:
    """Budget 16 kept, rolled back by the operator, then chosen again and kept: it is kept and
    best now (it read "rolled back" for ever, so the report called it kept in one table and
    not a candidate in the next). Budget 32 crashed once: never a candidate again, even after
    a later try stayed; budget 24 crashed under probation, which rolled it back."""
    b8, b16, b24, b32 = ({"budget": b} for b in (8, 16, 24, 32))
    history = [
        _ran(1, b8, b16),
        _ran(2, b16, b8, kind="rollback"),
        _ran(3, b8, b16),
    ]
    eight, sixteen = configurations(history)
    assert (sixteen.status, eight.status) == ("kept", "kept")
    assert best([eight, sixteen]) is sixteen
    assert configurations(history[:2])[1].status == "rolled back: by `specops rollback`"

    crashed = _ran(4, b16, b32, "rolled_back", signature="illegal_memory_access")
    again = _ran(5, b16, b32)
    probation = _ran(6, b24, b16, kind="rollback", source="probation", cause="cublas")
    configs = configurations([*history, crashed, again, _ran(5, b32, b24), probation])
    by_budget = {c.flags["budget"]: c for c in configs}
    assert by_budget[32].status == "rolled back: illegal_memory_access"
    assert by_budget[24].status == "rolled back: cublas (by probation)"
    assert by_budget[32].rolled_back and by_budget[24].rolled_back
    assert best(configs) is by_budget[16]
