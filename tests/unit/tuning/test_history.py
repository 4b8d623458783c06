"""The host history's pure parts: paths, round trips, abandoned entries, the rollback target."""

from __future__ import annotations

import pytest

from console.transport import remote
from console.tuning.history import (
    HistoryEntry,
    history_path,
    last_good,
    mark_abandoned,
    next_number,
    rollback_target,
)

UNIT = "sglang-k26-ddtree.service"


def entry(n: int, outcome: str, budget: int, kind: str = "change") -> HistoryEntry:
    return HistoryEntry(
        n=n,
        kind=kind,
        outcome=outcome,
        values={"budget": budget},
        argv=["python3", "-m", "sglang.launch_server"],
        environment={},
        dropin=None if kind == "original" else f"budget {budget}",
    )


HISTORY = [
    entry(0, "original", 8, "original"),
    entry(1, "kept", 4),
    entry(2, "rolled_back", 16),
    entry(3, "kept", 6),
    entry(4, "started", 12),
]


def test_the_path_is_per_unit_and_a_bad_unit_never_becomes_one() -> None:
    assert history_path(UNIT) == f"/var/lib/specops/{UNIT}/history.json"
    with pytest.raises(remote.UnsafeArgument):
        history_path("../../etc/passwd")


def test_an_entry_survives_its_json_record_and_a_bad_outcome_is_refused() -> None:
    original = HISTORY[3]
    assert HistoryEntry.from_record(original.record()) == original
    with pytest.raises(ValueError, match="outcome 'fine'"):
        HistoryEntry.from_record({**original.record(), "outcome": "fine"})


def test_last_good_is_the_newest_soaked_entry_and_rollback_goes_before_the_current() -> None:
    assert last_good(HISTORY) == HISTORY[3]
    assert rollback_target(HISTORY, {"budget": 6}) == HISTORY[1]  # never the crashed 16
    assert rollback_target(HISTORY, {"budget": 4}) == HISTORY[3]
    assert rollback_target(HISTORY[:1], {"budget": 8}) is None
    assert next_number(HISTORY) == 5


def test_started_entries_become_abandoned() -> None:
    entries = list(HISTORY)
    found = mark_abandoned(entries)
    assert [e.n for e in found] == [4]
    assert entries[4].outcome == "abandoned" and "stopped before the change ended" in (
        entries[4].reason
    )
    assert mark_abandoned(entries) == []
