"""The order the workers are handed the tests in (tests/schedule.py)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from tests import schedule


@dataclass(frozen=True)
class Item:
    nodeid: str


def suite() -> list[Item]:
    counts = {"unit": 2148, "testbed": 47, "ui": 94, "integration": 182, "e2e": 5}
    return [Item(f"tests/{k}/test_x.py::t{i}") for k, n in counts.items() for i in range(n)]


def test_each_worker_share_is_as_long_and_the_testbed_boots_twice() -> None:
    items = [*suite(), Item("tests/unit/test_hygiene.py::test_mypy_clean")]
    arranged = schedule.arrange(items, 6)
    assert sorted(i.nodeid for i in arranged) == sorted(i.nodeid for i in items)
    start, loads, testbeds = 0, [], []
    for size in schedule.shares(len(items), 6):
        share = arranged[start : start + size]
        start += size
        loads.append(sum(schedule.estimate(i) for i in share))
        testbeds.append(Counter(schedule.kind(i) for i in share)["testbed"])
        kinds = [schedule.kind(i) for i in share]
        if "testbed" in kinds:  # the testbed boots at the start of its shares
            assert kinds[0] == "testbed"
        assert kinds[-1] == "unit" and "unit" in kinds[: len(kinds) // 4]  # spread, not last
    assert max(loads) - min(loads) < 12.0  # within about one testbed test
    assert [n > 0 for n in testbeds] == [True, True, False, False, False, False]


def test_one_worker_keeps_every_test() -> None:
    items = suite()
    assert sorted(i.nodeid for i in schedule.arrange(items, 1)) == sorted(i.nodeid for i in items)
