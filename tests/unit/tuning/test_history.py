"""The host history's pure parts: paths, round trips, abandoned entries, the rollback target."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from console.hosts.events import Throughput
from console.transport import remote
from console.transport.host_files import STATE_ROOT
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
    assert history_path(UNIT, STATE_ROOT) == f"/var/lib/specops/{UNIT}/history.json"
    with pytest.raises(remote.UnsafeArgument):
        history_path("../../etc/passwd", STATE_ROOT)


def test_an_entry_survives_its_json_record_and_a_bad_outcome_is_refused() -> None:
    original = HISTORY[3]
    assert HistoryEntry.from_record(original.record()) == original
    with pytest.raises(ValueError, match="outcome 'fine'"):
        HistoryEntry.from_record({**original.record(), "outcome": "fine"})


def test_the_run_s_throughput_survives_the_record_and_old_files_without_it_still_load() -> None:
    kept = replace(HISTORY[3], accept_len=4.4, throughput=Throughput.of([800.0, 820.0, 840.0]))
    assert kept.throughput == Throughput(mean_tok_s=820.0, n=3)
    record = json.loads(json.dumps(kept.record()))  # as the host's file holds it
    assert record["throughput"] == {"mean_tok_s": 820.0, "n": 3}
    assert HistoryEntry.from_record(record) == kept
    # A history written before the field existed: no "throughput" key at all.
    old = {k: v for k, v in record.items() if k != "throughput"}
    assert HistoryEntry.from_record(old).throughput is None
    assert HistoryEntry.from_record({**record, "throughput": None}).throughput is None
    with pytest.raises(KeyError):  # load() reports it as "not a specops history"
        HistoryEntry.from_record({**record, "throughput": {"n": 3}})
    assert Throughput.of([]) is None


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
