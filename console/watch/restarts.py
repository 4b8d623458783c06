"""Restarts of one host's service: how many in the last minutes, and whether it crash-loops.

During a cuBLAS restart loop the unit read `active/running` half the time and
`activating/auto-restart` the other half, and each new run logged "ready": a crash loop did
not look like one. Restarts are counted from the two places they show: a new invocation id
in the journal, and systemd's `NRestarts` growing between polls (a run too short to log
anything). A host that restarted `LOOP_RESTARTS` times within `WINDOW_S` is crash-looping
until it has stayed up `STABLE_S` since its last restart. Restarts a change of this console
made (`planning`: from its start to `PLANNED_GRACE_S` after its end) are counted, but are no
crash loop: three changes in two minutes are the operator at work.

Pure: times are passed in (the host's clock for journal times, ours for polls; both are
seconds since the epoch and the windows are minutes wide).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

WINDOW_S = 600.0
"""The restarts column counts this far back (ten minutes)."""
LOOP_RESTARTS = 3
STABLE_S = 120.0
"""Up this long since the last restart, a crash-looping host is calm again."""
PLANNED_GRACE_S = 30.0
"""After a change ends, its restarts may still arrive (journal lines, the next status poll)."""


@dataclass(frozen=True)
class RestartSummary:
    recent: int
    """Restarts within `WINDOW_S`."""
    looping: bool


class RestartTracker:
    def __init__(self) -> None:
        self._times: deque[float] = deque(maxlen=256)
        self._invocations: set[str] = set()
        self._n_restarts: int | None = None
        self._unexplained = 0
        """Invocation changes seen since the last poll (each explains one NRestarts step)."""
        self._from_polls = 0
        """Restarts counted from NRestarts whose new run the journal has not shown yet."""
        self._unplanned: deque[float] = deque(maxlen=256)
        """The restarts no change of this console made: what a crash loop is made of."""
        self._planning = 0
        self._planned_until = float("-inf")
        self._found_running: str | None = None
        """The oldest run the journal showed, not counted: whether it was a restart only
        systemd's start records can tell (`earlier`)."""

    def planning(self, running: bool, at: float) -> None:
        """A change of this console began (`running`) or ended on the host, at `at`."""
        if running:
            self._planning += 1
        else:
            self._planning = max(0, self._planning - 1)
            self._planned_until = at + PLANNED_GRACE_S

    def _restarted(self, at: float, count: int = 1) -> None:
        self._times.extend([at] * count)
        if not (self._planning or at <= self._planned_until):
            self._unplanned.extend([at] * count)

    def invocation(self, invocation: str, at: float, *, first: bool = False) -> None:
        """A run seen in the journal; `first` for the run the console found running."""
        if invocation in self._invocations:
            return
        self._invocations.add(invocation)
        if first:
            self._found_running = invocation
            return
        if self._from_polls:  # the poll saw this restart first and counted it
            self._from_polls -= 1
            return
        self._restarted(at)
        self._unexplained += 1

    def earlier(self, starts: Sequence[tuple[float, str]], automatic: Sequence[float]) -> None:
        """What systemd recorded before the console looked (console/watch/unit_starts.py):
        the unit's starts (time, invocation) and its automatic restarts, oldest first. Every
        start after the first is a restart; one that followed an automatic restart (no
        operator's) counts towards a crash loop too. A run the journal already showed is not
        counted twice."""
        pending = sorted(automatic)
        for i, (at, invocation) in enumerate(sorted(starts)):
            automatic_before = bool(pending) and pending[0] <= at
            while pending and pending[0] <= at:
                pending.pop(0)
            known = invocation in self._invocations and invocation != self._found_running
            self._invocations.add(invocation)
            if invocation == self._found_running:
                self._found_running = None
            if i == 0 or known:
                continue
            self._times.append(at)
            if automatic_before:
                self._unplanned.append(at)

    def n_restarts(self, count: int, at: float) -> None:
        """systemd's NRestarts from a poll: steps no new invocation explained are restarts."""
        if self._n_restarts is not None and count > self._n_restarts:
            missing = max(0, count - self._n_restarts - self._unexplained)
            self._restarted(at, missing)
            self._from_polls += missing
        self._n_restarts = count
        self._unexplained = 0

    def summary(self, now: float) -> RestartSummary:
        recent = [t for t in self._times if now - t <= WINDOW_S]
        loops = [t for t in self._unplanned if now - t <= WINDOW_S]
        looping = len(loops) >= LOOP_RESTARTS and now - max(loops) < STABLE_S
        return RestartSummary(len(recent), looping)
