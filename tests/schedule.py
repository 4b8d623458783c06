"""The order the workers are handed the tests in.

`--dist worksteal` gives each of N workers an equal count of the collected tests, in
collection order, and later lets an idle worker take the back half of the longest queue. A
trace of every worker on a fresh 2-core clone showed what collection order did with that: four
workers each booted a testbed of their own (two systemd hosts apiece), and the run's last
minute was the testbed's 40 s tests, started late on two workers while four stood idle.

So `arrange` deals the tests out itself, by how long each kind takes (the figures: seconds per
test of each directory in that run): the testbed's tests only to the first two shares (two
testbeds, booted at once, at the start), the other slow kinds to whichever share has the least
to do, unit tests to fill every share to the count the scheduler will cut it at; within a
share the slow and the quick tests alternate (`interleave`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, TypeVar

SECONDS = {"testbed": 10.0, "e2e": 6.0, "ui": 5.7, "integration": 3.4, "unit": 0.1}
"""Seconds per test of each kind (a fresh clone's run, six workers on two cores)."""
SLOW_UNITS = {"tests/unit/test_hygiene.py::test_mypy_clean": 40.0}
"""Unit tests that are not quick (mypy with no cache on a fresh clone)."""
TESTBED_SHARES = 2


class Item(Protocol):
    @property
    def nodeid(self) -> str: ...


T = TypeVar("T", bound=Item)


def kind(item: Item) -> str:
    parts = item.nodeid.split("/")
    return parts[1] if len(parts) > 2 and parts[0] == "tests" else "unit"


def estimate(item: Item) -> float:
    return SLOW_UNITS.get(item.nodeid) or SECONDS.get(kind(item), SECONDS["unit"])


def shares(count: int, workers: int) -> list[int]:
    """How many tests xdist's work stealing hands each worker first (`len(pending) //
    nodes_remaining`, node by node)."""
    sizes = []
    for i in range(workers):
        size = count // (workers - i)
        sizes.append(size)
        count -= size
    return sizes


def arrange(items: Sequence[T], workers: int) -> list[T]:
    """`items` in the order that hands each of `workers` an even load (see the module)."""
    if workers < 2:
        return interleave(items)
    sizes = shares(len(items), workers)
    dealt: list[list[T]] = [[] for _ in sizes]
    load = [0.0] * workers
    quick = SECONDS["unit"]
    slow = sorted((i for i in items if estimate(i) > quick), key=lambda i: -estimate(i))
    fast = [i for i in items if estimate(i) <= quick]
    for item in [*slow, *fast]:
        allowed = range(min(TESTBED_SHARES, workers)) if kind(item) == "testbed" else range(workers)
        room = [k for k in allowed if len(dealt[k]) < sizes[k]] or [
            k for k in range(workers) if len(dealt[k]) < sizes[k]
        ]
        k = min(room, key=lambda k: (load[k], k))
        dealt[k].append(item)
        load[k] += estimate(item)
    return [item for share in dealt for item in interleave(share)]


def interleave(share: Sequence[T]) -> list[T]:
    """One share's order: its testbed tests first (the testbed boots at the start), then the
    other slow kinds taken in turn, with the unit tests spread evenly between them. A run that
    gave every worker its slow tests first and its unit tests last took 6:33 where collection
    order took 6:21: every worker waited on its user-interface tests at once, then raced its
    unit tests at once, where the CPU-bound and the waiting tests had shared the two cores."""
    quick = SECONDS["unit"]
    fast = [i for i in share if estimate(i) <= quick]
    by_kind: dict[str, list[T]] = {}
    for item in share:
        if estimate(item) > quick:
            by_kind.setdefault(kind(item), []).append(item)
    slow = by_kind.pop("testbed", [])
    queues = list(by_kind.values())
    while any(queues):
        slow += [queue.pop(0) for queue in queues if queue]
    if not slow:
        return list(fast)
    out: list[T] = []
    for n, item in enumerate(slow):
        out.append(item)
        out += fast[n * len(fast) // len(slow) : (n + 1) * len(fast) // len(slow)]
    return out
