"""A host's history as the TUI's history view shows it: one row per entry, newest first.

Read on the host (the history file and `systemctl cat`, both read-only), so the view knows
which entry runs now as well as the last good one. Per entry: the flag values it changed
against the configuration it replaced (the newest good entry before it), and its outcome in
a few words (kept, rolled back with the crash signature and stage, abandoned, original).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from console.hosts.profiles import FlagValue
from console.service.flags import format_value
from console.transport import remote
from console.transport.ssh import HostSession
from console.tuning import history
from console.tuning.history import HistoryEntry

OUTCOME_STYLE = {
    "kept": "green",
    "original": "cyan",
    "rolled_back": "yellow",
    "failed": "red",
    "abandoned": "bold red",
    "started": "bold yellow",
}
"""How `specops history` and the history view colour each outcome (rich style names)."""


@dataclass(frozen=True)
class HostHistory:
    host: str
    unit: str
    path: str
    entries: tuple[HistoryEntry, ...]
    """Oldest first, as stored; () when specops never changed the unit there."""
    running: Mapping[str, FlagValue]
    """The flag values of the effective unit, read with the history."""

    @property
    def newest_first(self) -> list[HistoryEntry]:
        return list(reversed(self.entries))

    @property
    def last_good(self) -> HistoryEntry | None:
        return history.last_good(self.entries)

    @property
    def current(self) -> HistoryEntry | None:
        return history.current_entry(self.entries, self.running)

    def marks(self, entry: HistoryEntry) -> str:
        """`now`, `good` or `now·good` (the entry running now / the last good one)."""
        current, good = self.current, self.last_good
        marks = [
            word
            for word, found in (("now", current), ("good", good))
            if found is not None and found.n == entry.n
        ]
        return "·".join(marks)


async def read_host_history(session: HostSession) -> HostHistory:
    profile = session.profile
    unit = profile.service.unit
    entries = await history.load(session, unit)
    cat = (await session.run(remote.systemctl_cat(unit), timeout=30)).stdout
    return HostHistory(
        host=profile.name,
        unit=unit,
        path=history.history_path(unit, profile.service.state_dir),
        entries=tuple(entries),
        running=history.running_values(profile, cat),
    )


def replaced(entries: Sequence[HistoryEntry], entry: HistoryEntry) -> HistoryEntry | None:
    """The configuration `entry` replaced: the newest good entry before it."""
    index = next(i for i, e in enumerate(entries) if e.n == entry.n)
    return next((e for e in reversed(entries[:index]) if e.good), None)


def changed_values(entries: Sequence[HistoryEntry], entry: HistoryEntry) -> dict[str, FlagValue]:
    """The values `entry` set that differ from the configuration it replaced (all of them
    for the first entry)."""
    base = replaced(entries, entry)
    if base is None:
        return dict(entry.values)
    return {k: v for k, v in entry.values.items() if base.values.get(k) != v}


def changes_text(entries: Sequence[HistoryEntry], entry: HistoryEntry) -> str:
    """`budget=16 cuda_graph=off`; `same as entry 1` when it set what ran before (a rollback
    after an abandoned change, say)."""
    if entry.kind == "original":
        return "the unit's own values"
    changed = changed_values(entries, entry)
    if changed:
        return values_text(changed)
    base = replaced(entries, entry)
    return f"same as entry {base.n}" if base is not None else "no flag changed"


def values_text(values: Mapping[str, FlagValue]) -> str:
    """`budget=8 topk=4 cuda_graph=on`, as `specops set` takes them."""
    return " ".join(f"{k}={format_value(v)}" for k, v in values.items())


def when_text(entry: HistoryEntry) -> str:
    """When it started, in UTC (as `specops history` prints it): `12-01 21:40:02`."""
    return datetime.fromtimestamp(entry.started_at, UTC).strftime("%m-%d %H:%M:%S")


def outcome_text(entry: HistoryEntry) -> str:
    """`kept`, `rolled back: illegal_memory_access in soak`, `abandoned`, `original`, …"""
    if entry.outcome in ("rolled_back", "failed"):
        word = "rolled back" if entry.outcome == "rolled_back" else "FAILED"
        what = entry.signature or ("crashed" if entry.stage else "")
        if entry.stage:
            what += f" in {entry.stage}"
        if not what and entry.reason:
            what = entry.reason
        return f"{word}: {what}" if what else word
    if entry.outcome == "started":
        return "started (running, or abandoned)"
    if entry.kind == "rollback":
        return f"{entry.outcome} (rollback)"
    return entry.outcome


def run_text(entry: HistoryEntry) -> str:
    """What its run measured: `accept 4.41 · 812.4 tok/s (n=10) · up 5s` (empty when nothing
    was)."""
    parts = []
    if entry.accept_len is not None:
        parts.append(f"accept {entry.accept_len:.2f}")
    if entry.throughput is not None:
        parts.append(entry.throughput.text())
    if entry.soaked_s:
        parts.append(f"up {entry.soaked_s:g}s")
    return " · ".join(parts)


def detail_lines(entry: HistoryEntry) -> list[str]:
    """What went wrong (reason, last exception, NRestarts) or how a kept run went."""
    extra: list[str] = []
    # A crash on probation the operator left alone keeps its entry kept, with the reason.
    failed = entry.outcome in ("rolled_back", "failed", "abandoned") or entry.stage == "probation"
    if failed and entry.reason:
        extra.append(entry.reason)
    if entry.exception_line:
        extra.append(f"last exception: {entry.exception_line}")
    if entry.restarts:
        extra.append(f"NRestarts before reset-failed: {entry.restarts}")
    if entry.outcome == "kept":
        accept = f"accept len {entry.accept_len:.2f}, " if entry.accept_len is not None else ""
        if entry.throughput is not None:
            accept += f"gen {entry.throughput.text()}, "
        extra.append(
            f"{accept}stayed up {entry.soaked_s or 0:g}s, invocation {entry.invocation_id}"
        )
    return extra
