"""Which configuration a host is left on after a change that did not end (issue 20, item 7).

A change interrupted half way (the console killed, the link lost for good) leaves its history
entry "started" (or "abandoned", once a later run noticed); a change whose rollback failed
ends "failed" with the rollback's error in its reason. Either way the unit files may not be
what runs. `specops status` reads the host's history and the main process's own command
line (console/service/running.py) and says, from those, what the host runs and why; the TUI
does the same for each host whenever the fleet's status refresh sees a new run of its unit
(`LeftOnWatch`, on the engine's loop): an alert and a notification naming the configuration.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from console.hosts.events import HostStateChanged, ServiceStatus
from console.hosts.profiles import FlagValue
from console.service.flags import format_value
from console.service.running import read_running
from console.transport.ssh import ConnState, HostSession, RemoteError
from console.tuning import history
from console.tuning.history import HistoryEntry

UNFINISHED = ("started", "abandoned")
ROLLBACK_FAILED = "; rollback failed: "
"""How a rollout's history reason carries its rollback's error (console/tuning/rollout.py)."""
NOT_ROLLED_BACK = "; not rolled back"
"""… and a `--no-rollback` failure's "not rolled back (--no-rollback): …"."""
MARKERS = (ROLLBACK_FAILED, NOT_ROLLED_BACK)


@dataclass(frozen=True)
class LeftOn:
    values: Mapping[str, FlagValue]
    """What runs: the main process's flag values, else the unit files'."""
    source: str
    """"running command" or "unit files" (the process could not be read)."""
    entry: HistoryEntry | None
    """The change that did not end, if that is why; None: only the files differ."""
    files: Mapping[str, FlagValue]
    note: str

    def text(self) -> str:
        return f"left on: {values_text(self.values)} ({self.note})"

    def record(self) -> dict[str, object]:
        data: dict[str, object] = {
            "flags": dict(self.values),
            "source": self.source,
            "files_flags": dict(self.files),
            "note": self.note,
        }
        if self.entry is not None:
            data.update(
                entry=self.entry.n,
                kind=self.entry.kind,
                action=self.entry.what,
                outcome=self.entry.outcome,
                who=self.entry.who,
                started_at=self.entry.started_at,
                rollout=self.entry.rollout or None,
            )
        return data


def values_text(values: Mapping[str, FlagValue]) -> str:
    return " ".join(f"{k}={format_value(v)}" for k, v in values.items()) or "-"


def unended(entries: Sequence[HistoryEntry]) -> HistoryEntry | None:
    """The newest entry, when it did not end on a configuration it verified: never finished,
    or its rollback failed."""
    newest = max(entries, key=lambda e: e.n, default=None)
    if newest is None:
        return None
    if newest.outcome in UNFINISHED or _marker(newest.reason) is not None:
        return newest
    return None


def _marker(reason: str) -> int | None:
    found = [i for m in MARKERS if (i := reason.find(m)) >= 0]
    return min(found) if found else None


def _differing(
    these: Mapping[str, FlagValue], runs: Mapping[str, FlagValue]
) -> dict[str, FlagValue]:
    return {k: v for k, v in these.items() if runs.get(k) != v}


def _entry_note(entry: HistoryEntry) -> str:
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(entry.started_at))
    rollout = f" of rollout {entry.rollout}" if entry.rollout else ""
    what = f"{entry.what} #{entry.n}{rollout} by {entry.who}, {when}"
    if entry.outcome == "started":
        return f"{what}, never finished: the console stopped or lost the link (or still runs)"
    if entry.outcome == "abandoned":
        return f"{what}, abandoned half way"
    return f"{what}, failed{entry.reason[_marker(entry.reason) or 0 :]}"


def left_on(
    entries: Sequence[HistoryEntry],
    files: Mapping[str, FlagValue],
    running: Mapping[str, FlagValue] | None,
) -> LeftOn | None:
    """What the host is left on, when a change did not end or the files are not what runs;
    None when all is as the files say. `running`: the main process's values (None: unread)."""
    entry = unended(entries)
    values = dict(running) if running is not None else dict(files)
    source = "running command" if running is not None else "unit files"
    differs = running is not None and dict(running) != dict(files)
    if entry is None and not differs:
        return None
    notes = [] if entry is None else [_entry_note(entry)]
    if entry is not None and (meant := _differing(entry.values, values)):
        notes.append(f"it set {values_text(meant)}")
    if differs:
        said = values_text(_differing(files, values))
        notes.append(f"the unit files say {said}; not restarted since")
    elif running is None:
        notes.append("the running command could not be read: these are the unit files'")
    return LeftOn(values, source, entry, dict(files), "; ".join(notes))


async def read_left_on(session: HostSession, files: Mapping[str, FlagValue]) -> LeftOn | None:
    """`left_on` from the host's history and its main process (`files`: the unit files'
    values). Either read may fail (no history yet, no sudo for /proc): that part is left out."""
    unit = session.profile.service.unit
    try:
        entries = await history.load(session, unit)
    except (history.HistoryError, RemoteError):
        entries = []
    try:
        running = await read_running(session, unit)
    except RemoteError:
        running = None
    profile = session.profile  # the files' values come masked; so must the process's
    values = profile.masked(running.flags(profile)) if running is not None else None
    return left_on(entries, files, values)


@dataclass(frozen=True)
class LeftOnFound:
    """A host a change did not finish on, found by the fleet's status refresh."""

    host: str
    left: LeftOn
    timestamp: float = field(default_factory=time.time)

    def text(self) -> str:
        """`b300 left on: budget=4 … (change #1 by …, never finished: …)`."""
        return f"{self.host} {self.left.text()}"


def _key(status: ServiceStatus) -> object:
    """What makes a status worth reading again: a new run, or other unit files."""
    return (status.invocation_id, sorted(status.flags.items()))


class LeftOnWatch:
    """Reads what each host is left on whenever its status shows a run (or unit files) not
    read before, and reports a host a change did not finish on, once per finding.

    Feed it every fleet event (`observe`), on the loop that owns the sessions. A host with a
    change of this console running is held (`hold`) until it ends (`release`, which reads it
    again): its own "started" entry is not a change left unfinished.
    """

    def __init__(
        self, sessions: Mapping[str, HostSession], on_found: Callable[[LeftOnFound], object]
    ) -> None:
        self.sessions = sessions
        self.on_found = on_found
        self.found: dict[str, LeftOnFound] = {}
        """The hosts left on an unfinished change, as of their last read."""
        self._seen: dict[str, object] = {}
        self._status: dict[str, ServiceStatus] = {}
        self._held: set[str] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._locks: dict[str, asyncio.Lock] = {}

    def observe(self, event: object) -> None:
        if isinstance(event, HostStateChanged) and event.state.state is ConnState.CONNECTED:
            host = event.host
            if host in self._status and host not in self._seen and host not in self._held:
                self._read(host)  # a read the link cut short
            return
        if not isinstance(event, ServiceStatus) or event.error is not None:
            return
        if event.host not in self.sessions:
            return
        self._status[event.host] = event
        if self._seen.get(event.host) != _key(event) and event.host not in self._held:
            self._seen[event.host] = _key(event)
            self._read(event.host)

    def hold(self, host: str) -> None:
        self._held.add(host)

    def release(self, host: str) -> None:
        """The console's own change on `host` ended: read what it left."""
        self._held.discard(host)
        self._seen.pop(host, None)
        if host in self._status:
            self._read(host)

    def _read(self, host: str) -> None:
        task = asyncio.create_task(self._check(host), name=f"left-on:{host}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _check(self, host: str) -> None:
        # One read at a time per host: a later one sees what the earlier one reported.
        async with self._locks.setdefault(host, asyncio.Lock()):
            session = self.sessions[host]
            left = await read_left_on(session, self._status[host].flags)
            if host in self._held:
                return
            if session.state.state is not ConnState.CONNECTED:
                self._seen.pop(host, None)  # the link went during the read: read again
                return  # once it is back
            self._seen[host] = _key(self._status[host])
            if left is None:
                self.found.pop(host, None)
                return
            before = self.found.get(host)
            if before is None or before.left.text() != left.text():
                self.found[host] = LeftOnFound(host, left)
                self.on_found(self.found[host])

    async def stop(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
