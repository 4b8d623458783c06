"""What `status` says a host is left on, from its history and its main process."""

from __future__ import annotations

from console.tuning.history import HistoryEntry
from console.tuning.left_on import left_on


def entry(n: int, outcome: str, reason: str = "", budget: int = 16) -> HistoryEntry:
    return HistoryEntry(
        n=n,
        kind="change",
        outcome=outcome,
        values={"budget": budget},
        argv=[],
        environment={},
        dropin=None,
        who="alice@desk",
        reason=reason,
    )


ORIGINAL = entry(0, "original", budget=8)


def test_a_failed_rollback_names_the_change_and_why() -> None:
    failed = entry(1, "failed", "crash: illegal_memory_access; rollback failed: link lost")
    left = left_on([ORIGINAL, failed], {"budget": 16}, {"budget": 16})
    assert left is not None and left.entry == failed
    assert left.text().startswith("left on: budget=16 (set #1 by alice@desk, ")
    assert left.text().endswith(", failed; rollback failed: link lost)")


def test_a_change_interrupted_before_its_restart_says_what_it_meant() -> None:
    left = left_on([ORIGINAL, entry(1, "abandoned")], {"budget": 16}, {"budget": 8})
    assert left is not None
    assert left.values == {"budget": 8} and left.source == "running command"
    assert left.text().endswith(
        "abandoned half way; it set budget=16; the unit files say budget=16; not restarted since)"
    )


def test_an_unread_process_falls_back_to_the_files_and_says_so() -> None:
    left = left_on([ORIGINAL, entry(1, "started")], {"budget": 16}, None)
    assert left is not None and left.source == "unit files"
    assert "the running command could not be read" in left.note


def test_ended_changes_and_a_matching_process_say_nothing() -> None:
    rolled = entry(2, "rolled_back", "crash: x", budget=32)
    assert left_on([ORIGINAL, entry(1, "kept"), rolled], {"budget": 16}, {"budget": 16}) is None
    assert left_on([], {"budget": 8}, {"budget": 8}) is None
    assert left_on([], {"budget": 8}, None) is None
