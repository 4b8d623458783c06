"""What the history view shows per entry, and where a rollback goes (pure parts)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from console.hosts.events import Throughput
from console.tuning.history import current_entry
from console.tuning.history_rows import (
    HostHistory,
    changes_text,
    detail_lines,
    outcome_text,
    run_text,
    when_text,
)
from console.tuning.rollback import RollbackError, choose_target
from tests.unit.tuning.test_history import HISTORY, UNIT, entry


def host_history(running: dict[str, int]) -> HostHistory:
    return HostHistory("b300", UNIT, "/var/lib/specops/x", tuple(HISTORY), running)


def test_the_current_entry_is_the_newest_good_one_with_the_running_values() -> None:
    assert current_entry(HISTORY, {"budget": 6}) == HISTORY[3]
    assert current_entry(HISTORY, {"budget": 8}) == HISTORY[0]
    assert current_entry(HISTORY, {"budget": 16}) is None  # a crashed entry never runs
    assert current_entry(HISTORY, {"budget": 12}) is None  # changed outside specops
    found = host_history({"budget": 6})
    assert [found.marks(e) for e in found.newest_first] == ["", "now·good", "", "", ""]
    elsewhere = host_history({"budget": 4})
    assert [elsewhere.marks(e) for e in elsewhere.newest_first] == ["", "good", "", "now", ""]


def test_changes_are_against_the_configuration_each_entry_replaced() -> None:
    assert changes_text(HISTORY, HISTORY[0]) == "the unit's own values"
    assert changes_text(HISTORY, HISTORY[1]) == "budget=4"
    assert changes_text(HISTORY, HISTORY[2]) == "budget=16"
    # After the crash was rolled back the host ran entry 1 again: 6 replaced 4, not 16.
    assert changes_text(HISTORY, HISTORY[3]) == "budget=6"
    back = [*HISTORY, entry(5, "kept", 4, kind="rollback")]
    assert changes_text(back, back[5]) == "budget=4"
    again = [*HISTORY, entry(5, "kept", 6, kind="rollback")]
    assert changes_text(again, again[5]) == "same as entry 3"


def test_outcomes_name_the_crash_and_its_stage() -> None:
    crashed = replace(HISTORY[2], signature="illegal_memory_access", stage="capture")
    assert outcome_text(crashed) == "rolled back: illegal_memory_access in capture"
    unnamed = replace(HISTORY[2], stage="soak")
    assert outcome_text(unnamed) == "rolled back: crashed in soak"
    failed = replace(HISTORY[2], outcome="failed", reason="no health after 600s")
    assert outcome_text(failed) == "FAILED: no health after 600s"
    assert outcome_text(HISTORY[4]) == "started (running, or abandoned)"
    assert outcome_text(replace(HISTORY[1], kind="rollback")) == "kept (rollback)"
    assert outcome_text(HISTORY[0]) == "original"


def test_the_run_and_the_time_are_shown_when_known() -> None:
    kept = replace(HISTORY[1], accept_len=4.312, soaked_s=60.0, started_at=1764625200.0)
    assert run_text(kept) == "accept 4.31 · up 60s"
    assert run_text(HISTORY[2]) == ""
    measured = replace(kept, throughput=Throughput(mean_tok_s=812.44, n=10), invocation_id="ab")
    assert run_text(measured) == "accept 4.31 · 812.4 tok/s (n=10) · up 60s"
    assert detail_lines(measured) == [
        "accept len 4.31, gen 812.4 tok/s (n=10), stayed up 60s, invocation ab"
    ]
    assert when_text(kept) == "12-01 21:40:00"  # UTC, as `specops history` prints it


def test_a_rollback_goes_to_entry_n_or_the_newest_good_one_not_running() -> None:
    assert choose_target("b300", HISTORY, {"budget": 6}, None) == HISTORY[1]
    assert choose_target("b300", HISTORY, {"budget": 6}, 0) == HISTORY[0]
    with pytest.raises(RollbackError, match=r"b300: no history entry 9 \(there are 0, 1, 2"):
        choose_target("b300", HISTORY, {"budget": 6}, 9)
    with pytest.raises(RollbackError, match="no earlier good configuration"):
        choose_target("b300", HISTORY[:1], {"budget": 8}, None)
