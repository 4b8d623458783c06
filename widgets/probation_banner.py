"""The probation banner: which hosts are on probation, and a probation rollback's countdown.

A crash during probation (console/tuning/probation.py) is announced here with the seconds
left and the key that cancels it (`x`, binding `probation-cancel`), besides a notification;
between crashes the banner says which hosts are on probation and for how long
(`on probation: b300 27m left`). Hidden when no host is on probation and nothing counts down.
"""

from __future__ import annotations

from typing import Literal

from rich.text import Text
from textual.message import Message
from textual.widgets import Static

from console.hosts.clock import SYSTEM, Clock
from console.tuning.probation import (
    Probation,
    ProbationAnnounced,
    ProbationCancelled,
    ProbationDone,
    ProbationEvent,
    ProbationState,
    ProbationTick,
)

REFRESH_S = 10.0
"""The minutes left are redrawn this often (and at every event)."""


class ProbationUpdated(Message):
    """A probation event of the engine, carried to the app."""

    def __init__(self, event: ProbationEvent) -> None:
        super().__init__()
        self.event = event


class ProbationBanner(Static):
    DEFAULT_CSS = """
    ProbationBanner {
        display: none;
        height: auto;
        padding: 0 1;
        background: $boost;
        color: $text-accent;
    }
    ProbationBanner.-active { display: block; }
    ProbationBanner.-countdown { background: $error 30%; color: $text; text-style: bold; }
    """

    def __init__(
        self, *, cancel_key: str = "x", clock: Clock = SYSTEM, id: str | None = None
    ) -> None:
        super().__init__("", id=id)
        self.cancel_key = cancel_key
        self.clock = clock
        """What the probation windows left are measured against (the fleet's clock)."""
        self.probations: dict[str, Probation] = {}
        self.countdowns: dict[str, tuple[ProbationAnnounced, float]] = {}
        """Hosts whose rollback is announced: the announcement and the seconds left."""
        self.notes: dict[str, str] = {}
        """The last outcome per host (cancelled, rolled back), until its next probation."""

    def on_mount(self) -> None:
        self.set_interval(REFRESH_S, self._draw)

    def show(self, event: ProbationEvent) -> None:
        host = event.host
        if isinstance(event, ProbationState):
            if event.probation is None:
                self.probations.pop(host, None)
            else:
                self.probations[host] = event.probation
        elif isinstance(event, ProbationAnnounced):
            self.notes.pop(host, None)
            if event.reason is None:
                self.countdowns[host] = (event, event.countdown_s)
            else:
                self.notes[host] = f"{host} crashed on probation: {event.reason}"
        elif isinstance(event, ProbationTick):
            if host in self.countdowns:
                self.countdowns[host] = (self.countdowns[host][0], event.left_s)
        elif isinstance(event, ProbationCancelled | ProbationDone):
            self.countdowns.pop(host, None)
            self.notes[host] = (
                event.detail
                if isinstance(event, ProbationCancelled)
                else (f"{host}: probation rollback: {event.detail}")
            )
        self._draw()

    def text(self) -> str:
        lines: list[str] = []
        for host, (event, left) in self.countdowns.items():
            crash = event.crash
            lines.append(
                f"{host}: {crash.signature or 'restart'} {crash.since_kept_s:.0f}s after a kept "
                f"change (probation) — rolling back to {event.target} in {left:.0f}s · "
                f"press {self.cancel_key} to cancel"
            )
        lines.extend(self.notes.values())
        now = self.clock.time()
        on = [
            f"{h} {p.label(now).removeprefix('probation ')}"
            for h, p in self.probations.items()
            if p.left_s(now) > 0 and h not in self.countdowns
        ]
        if on:
            lines.append("on probation: " + ", ".join(on))
        return "\n".join(lines)

    def _draw(self) -> None:
        text = self.text()
        self.set_class(bool(text), "-active")
        self.set_class(bool(self.countdowns), "-countdown")
        self.update(Text(text))


Severity = Literal["information", "warning", "error"]


def probation_note(event: ProbationEvent) -> tuple[str, Severity] | None:
    """The notification an event deserves (text, severity), or None (ticks, states)."""
    if isinstance(event, ProbationAnnounced):
        crash = event.crash
        what = crash.signature or "restart"
        head = f"{event.host}: {what} {crash.since_kept_s:.0f}s after {crash.kept_change}"
        if event.reason is not None:
            return f"{head} (on probation): {event.reason}", "error"
        return (
            f"{head}: rolling back to {event.target} in {event.countdown_s:g}s — press x to cancel",
            "error",
        )
    if isinstance(event, ProbationCancelled):
        return event.detail, "warning"
    if isinstance(event, ProbationDone):
        return f"{event.host}: probation rollback: {event.detail}", (
            "information" if event.ok else "error"
        )
    return None
