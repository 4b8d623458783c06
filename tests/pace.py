"""How long a test may wait for something that happens in real time, on this machine.

Most waits are on the fleet's injected clock; what is left is real: SSH handshakes, simulated
servers loading and decoding on their own timeline, a subprocess starting Python. A bound on
such a wait is a guard against a hang, not a claim about speed, and it must hold on the
machine the suite runs on: six workers on one shared core (`taskset -c 0`) starve each other
twice as much as on the two cores the bounds were set on. `deadline()` and `bound()`
scale a bound by the workers each core carries (SPECOPS_TEST_SLOWER overrides the factor);
conftest.py scales the per-test timeout the same way.
"""

from __future__ import annotations

import os
import time

WORKERS_PER_CORE = 2.0
"""The load a bound holds for as written; six workers on two cores get half as much again,
on one core three times as much."""


def _factor() -> float:
    given = os.environ.get("SPECOPS_TEST_SLOWER")
    if given:
        return max(1.0, float(given))
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1)
    return max(1.0, workers / (WORKERS_PER_CORE * max(1, cores or 1)))


SLOWER = _factor()


def bound(seconds: float) -> float:
    """`seconds` as a bound on this machine."""
    return seconds * SLOWER


def deadline(seconds: float) -> float:
    """The `time.monotonic()` by which something bounded by `seconds` must have happened."""
    return time.monotonic() + bound(seconds)
