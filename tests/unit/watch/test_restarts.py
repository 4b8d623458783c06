"""Restarts counted from new invocations and NRestarts, once each; crash loops until calm."""

from __future__ import annotations

from console.watch.restarts import PLANNED_GRACE_S, STABLE_S, WINDOW_S, RestartTracker

T = 1_000_000.0


def test_the_run_found_running_is_no_restart_and_each_later_run_is_one() -> None:
    tracker = RestartTracker()
    tracker.invocation("a", T, first=True)
    tracker.invocation("b", T + 10)
    tracker.invocation("b", T + 11)  # the same run again
    assert tracker.summary(T + 20).recent == 1


def test_nrestarts_steps_count_once_whichever_is_seen_first() -> None:
    tracker = RestartTracker()
    tracker.n_restarts(4, T)  # the first poll: a baseline, not four restarts
    tracker.invocation("a", T, first=True)
    tracker.invocation("b", T + 5)  # journal first, then the poll: one restart
    tracker.n_restarts(5, T + 6)
    tracker.n_restarts(7, T + 20)  # two runs too short to log: two restarts
    tracker.invocation("c", T + 21)  # one of them shows up in the journal after all
    assert tracker.summary(T + 30).recent == 3


def test_three_restarts_are_a_loop_until_the_host_stays_up() -> None:
    tracker = RestartTracker()
    tracker.invocation("a", T, first=True)
    for i, run in enumerate("bcd"):
        tracker.invocation(run, T + 30 * (i + 1))
    last = T + 90
    assert tracker.summary(last + 1).looping
    assert tracker.summary(last + STABLE_S - 1).looping
    calm = tracker.summary(last + STABLE_S + 1)
    assert not calm.looping and calm.recent == 3
    assert tracker.summary(last + WINDOW_S + 31).recent == 0


def test_restarts_of_this_consoles_own_changes_are_counted_but_are_no_loop() -> None:
    """Three changes in two minutes are the operator at work, not a crash loop."""
    tracker = RestartTracker()
    tracker.invocation("run-0", T, first=True)
    for i in range(3):
        tracker.planning(True, T + 40 * i)
        tracker.invocation(f"run-{i + 1}", T + 40 * i + 5)
        tracker.planning(False, T + 40 * i + 20)
    tracker.invocation("run-4", T + 100 + PLANNED_GRACE_S - 1)  # late: still the change's
    summary = tracker.summary(T + 130)
    assert summary.recent == 4 and not summary.looping
    # Crashes of its own, after the changes: a loop again.
    for i in range(3):
        tracker.invocation(f"crash-{i}", T + 200 + 10 * i)
    assert tracker.summary(T + 230).looping


def test_runs_before_the_console_looked_count_once_and_only_automatic_ones_loop() -> None:
    """Seven runs in the ten minutes before the console opened (it showed `-`): six
    restarts. Three followed an automatic restart (a crash loop); the operator's own restarts
    count but are no loop. Runs the journal's start-up read also showed count once."""
    starts = [(T + 60 * i, f"run{i}") for i in range(7)]
    operator = RestartTracker()
    operator.invocation("run5", T + 300, first=True)  # the start-up read's oldest run
    operator.invocation("run6", T + 360)  # and the one running now: already a restart
    operator.earlier(starts, automatic=[])
    summary = operator.summary(T + 400)
    assert summary.recent == 6 and not summary.looping

    looping = RestartTracker()
    looping.earlier(starts, automatic=[T + 60 * i - 5 for i in (4, 5, 6)])
    summary = looping.summary(T + 400)
    assert summary.recent == 6 and summary.looping
    assert not looping.summary(T + 360 + STABLE_S + 1).looping  # up two minutes: calm again
    assert RestartTracker().summary(T).recent == 0
