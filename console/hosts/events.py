"""The domain events the engine emits; the TUI turns them into messages, the CLI prints them.

Plain frozen dataclasses, past tense, no Textual. Each names its host. `JournalEntry`, built
once per journal line, is a frozen msgspec Struct instead (its constructor is C).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import msgspec

from console.hosts.profiles import FlagValue


class ConnState(StrEnum):
    CONNECTING = "connecting"
    CONNECTED = "connected"
    RECONNECTING = "reconnecting"
    UNREACHABLE = "unreachable"
    HOST_KEY_REFUSED = "host key refused"
    CLOSED = "closed"
    IDLE = "idle"
    """Closed on purpose, not in trouble: in on-demand mode a host nobody is looking at has no
    connection (console/fleet/demand.py); it is opened again as soon as it is wanted."""


@dataclass(frozen=True)
class HostState:
    host: str
    state: ConnState
    detail: str = ""
    fingerprint: str | None = None
    """SHA256 fingerprint of the key the host offered, when it was refused."""
    since: float = 0.0
    retry_s: float | None = None
    """Unreachable: seconds until the session tries again (a console that stays says so; a
    one-shot command, which does not stay, does not)."""


class JournalEntry(msgspec.Struct, frozen=True, gc=False):
    """One record of the unit: a journal entry, plus the header-less lines that continue it.

    A frozen msgspec Struct, not a dataclass: one is built for every journal line, and its
    `__init__` is C (0.05-0.08 µs; a slots dataclass took 0.16-0.22, a frozen one 1.2 with
    `object.__setattr__` per field). `gc=False`: it holds only strings, numbers and tuples of
    them, so it can be in no reference cycle. `msgspec.structs.replace` makes a changed copy.
    """

    host: str
    cursor: str
    """The resume point: the cursor of the record's last journal entry."""
    timestamp: float
    """Seconds since the epoch (journald's receive time of the first line)."""
    message: str
    priority: int = 6
    invocation: str | None = None
    pid: str | None = None
    seq: tuple[str, int] | None = None
    """`(__SEQNUM_ID, __SEQNUM)` of the record's last journal entry."""
    dropped: int = 0
    """For journald's `Suppressed N messages` notices: N (-1 when not stated); a known gap."""
    continuation: tuple[str, ...] = ()
    """Header-less lines (a traceback) that belong to this record."""
    new_invocation: bool = False
    """The first record of a new `_SYSTEMD_INVOCATION_ID` after another one: a restart."""
    crash: str | None = None
    """The crash signature (`console.watch.signatures`) found anywhere in the record."""
    read_back: int = 0
    """On the last record read back after the host was idle (on-demand mode): how many journal
    lines were read back. Views mark the boundary after it: what follows is live."""

    @property
    def lines(self) -> tuple[str, ...]:
        return (self.message, *self.continuation)

    @property
    def text(self) -> str:
        """The whole record, lines joined by newlines (what SGLang logged in one call)."""
        return "\n".join(self.lines) if self.continuation else self.message


@dataclass(frozen=True)
class HostStateChanged:
    state: HostState

    @property
    def host(self) -> str:
        return self.state.host


@dataclass(frozen=True)
class JournalBatch:
    host: str
    entries: list[JournalEntry]
    read_back: bool = False
    """Logged while the host was idle (closed in on-demand mode), read back on reopening."""


@dataclass(frozen=True)
class ServiceStatus:
    """The unit as systemd reports it, plus the flag values of its effective ExecStart."""

    host: str
    active_state: str = "unknown"
    sub_state: str = "unknown"
    result: str = ""
    invocation_id: str = ""
    n_restarts: int = 0
    need_daemon_reload: bool = False
    flags: dict[str, FlagValue] = field(default_factory=dict)
    error: str | None = None
    """Why the status could not be read (the host is still connected)."""
    sglang_version: str | None = None
    """`sglang.__version__` of the unit's interpreter, when it was asked and answered."""


@dataclass(frozen=True)
class MetricsUpdated:
    """New numbers from a host's journal batch (console/watch/monitor.py); the newest of each."""

    host: str
    timestamp: float
    """Journal time of the newest sample."""
    values: dict[str, float]
    """`accept_len`, `gen_throughput`, ... and the profile's `[[metrics]]` names."""
    graph: bool | None = None
    """Whether the newest decode batch ran in a CUDA (or NPU...) graph; None when unknown."""
    source: str = "journal"
    """Where the numbers came from: `journal`, `/metrics` (the server's own page) or
    `prometheus` (console/watch/poller.py)."""


@dataclass(frozen=True)
class CrashDetected:
    """A crash signature in a host's journal: what died, in which run, with which flags."""

    host: str
    invocation: str | None
    signature: str
    """A `console.watch.signatures.CRASH_SIGNATURES` name, e.g. `illegal_memory_access`."""
    first_line: str
    """The first line of the record that carries the signature (e.g. `Scheduler hit ...`)."""
    line: str
    """The line the signature was found in (the traceback's last line, typically)."""
    flags: dict[str, FlagValue] | None
    """The flag values of that invocation; None when they could not be read."""
    timestamp: float
    cursor: str
    live: bool = True
    """False for a crash found in the history read at start-up (an older run)."""
    read_back: bool = False
    """Found in lines read back after the host was idle: it happened at `timestamp`, while no
    one followed the host; an alert, never a cause for an action meant for now."""


@dataclass(frozen=True)
class InvocationChanged:
    """The service started a new run (`_SYSTEMD_INVOCATION_ID` changed in its journal)."""

    host: str
    invocation: str
    previous: str | None
    timestamp: float
    read_back: bool = False
    """Seen in lines read back after the host was idle (the restart happened back then)."""


@dataclass(frozen=True)
class ServiceReady:
    """The server logged its ready marker (`The server is fired up and ready to roll!`)."""

    host: str
    invocation: str | None
    timestamp: float


@dataclass(frozen=True)
class HealthChecked:
    """The server's `/health` answer changed (`ok`, `503`, `timeout`, `closed`, …)."""

    host: str
    health: str
    timestamp: float


MonitorEvent = MetricsUpdated | CrashDetected | InvocationChanged | ServiceReady


class RolloutStep(StrEnum):
    """The steps of a flag change (console/tuning/rollout.py), in order; rollback reuses some."""

    RECORD = "record"
    WRITE = "write drop-in"
    DAEMON_RELOAD = "daemon-reload"
    VERIFY = "verify reload"
    RESET_FAILED = "reset-failed"
    RESTART = "restart"
    INVOCATION = "new invocation"
    READY = "wait ready"
    SMOKE = "smoke test"
    SETTLE = "first decode"
    SOAK = "soak"
    HISTORY = "history"
    RESTORE = "restore drop-in"


class ChangeAction(StrEnum):
    """What asked for a change, named alike in the audit log, the host's history and the
    ledger (console/tuning/change.py runs every one of them)."""

    SET = "set"
    """An operator's new flag values (`specops set`, the TUI's flag editor)."""
    ROLLBACK = "rollback"
    """An operator's rollback (`specops rollback`, the TUI's `R` and history view)."""
    PROBATION_ROLLBACK = "probation-rollback"
    """A kept change that crashed during its probation, put back by the console."""
    SWEEP_CELL = "sweep-cell"
    """One cell of a tuning campaign (`specops sweep`)."""
    SWEEP_END = "sweep-end"
    """A campaign putting the host on its end state (where it started, or the best cell)."""
    GROUP_SET = "group-set"
    """One host of a change to many (`specops set HOST HOST… NAME=VALUE`, in waves)."""

    @property
    def kind(self) -> str:
        """ "rollback" when an operator or probation goes back to an earlier configuration,
        else "change" (a campaign's return is a change: it marks no cell rolled back)."""
        rollbacks = (ChangeAction.ROLLBACK, ChangeAction.PROBATION_ROLLBACK)
        return "rollback" if self in rollbacks else "change"

    @classmethod
    def of_record(cls, kind: str, source: str = "") -> ChangeAction:
        """The action of a record written before actions were named (its kind and source)."""
        if kind != "rollback":
            return cls.SET
        return cls.PROBATION_ROLLBACK if source == "probation" else cls.ROLLBACK


@dataclass(frozen=True)
class RolloutProgress:
    """One step of a rollout started, finished, failed, or (READY) is still waiting."""

    host: str
    step: RolloutStep
    state: str
    """"running", "ok", "failed", "skipped" or "waiting" (a periodic update of a long wait)."""
    detail: str = ""
    elapsed_s: float = 0.0
    """Seconds since the rollout began."""
    rollback: bool = False
    """True for the steps that put the previous configuration back."""


@dataclass(frozen=True)
class RolloutJournal:
    """Journal lines of the invocation the rollout is watching (the new one, or the rollback's)."""

    host: str
    invocation: str
    lines: tuple[str, ...]


class RolloutOutcome(StrEnum):
    APPLIED = "applied"
    """Healthy on the new setting."""
    ROLLED_BACK = "rolled back"
    """The new setting failed; the previous one is back and healthy."""
    FAILED = "failed"
    """The change failed and the host is not known to be healthy (no rollback, or it failed)."""


@dataclass(frozen=True)
class Throughput:
    """Generation throughput over a run: the mean of the decode lines' `gen throughput`."""

    mean_tok_s: float
    n: int
    """How many decode lines the mean is over."""

    @classmethod
    def of(cls, values: list[float]) -> Throughput | None:
        """The summary of `values` (None when there is none)."""
        if not values:
            return None
        return cls(mean_tok_s=round(sum(values) / len(values), 2), n=len(values))

    def text(self) -> str:
        """`812.4 tok/s (n=10)`."""
        return f"{self.mean_tok_s:.1f} tok/s (n={self.n})"


@dataclass(frozen=True)
class RolloutFinished:
    host: str
    outcome: RolloutOutcome
    reason: str = ""
    """Why the new setting was refused (crash signature, unit failed, timeout, smoke answer)."""
    signature: str | None = None
    """The crash signature (console.watch.sglang) seen in the new invocation's journal."""
    phase: str | None = None
    """What the server was doing when it failed, e.g. "CUDA graph capture"."""
    excerpt: tuple[str, ...] = ()
    """The failing invocation's journal (its last lines), kept for the report."""
    failed_invocation: str | None = None
    invocation_id: str = ""
    """The invocation running at the end."""
    flags: dict[str, FlagValue] = field(default_factory=dict)
    """The flag values in effect at the end."""
    accept_len: float | None = None
    """The first accept length the new invocation logged (after a successful change)."""
    throughput: Throughput | None = None
    """Generation throughput over the soak window's decode lines (after a successful change)."""
    rollback_error: str | None = None
    duration_s: float = 0.0
    stage: str | None = None
    """When the new setting failed: "capture", "startup" (before ready) or "soak" (after)."""
    ready_to_crash_s: float | None = None
    """Seconds from the server's "ready to roll" to its crash (a failure after ready)."""
    soaked_s: float | None = None
    """The soak the new setting survived (an applied change)."""
    exception_line: str | None = None
    """The failing invocation's last exception line (`RuntimeError: …`)."""
    history_entry: int | None = None
    """This rollout's entry in the host's history (/var/lib/specops/UNIT/history.json)."""
    abandoned: tuple[str, ...] = ()
    """Earlier rollouts this one found abandoned half way in the host's history."""
    warnings: tuple[str, ...] = ()
    """Deprecation warnings the server printed at start-up (SGLang 0.5.16 on)."""
    unreachable: bool = False
    """The link stayed down past `reconnect_s` while rolling back (`rollback_error` says
    which configuration the host is left on; the CLI exits 3)."""
    untouched: bool = False
    """Refused before anything on the host changed (its history unreadable, the link down
    at the start): no experiment to record."""
    xids: tuple[str, ...] = ()
    """The GPU driver's Xid errors within 30 s of the crash (`Xid 31 on GPU 0 at …`)."""
    gpus_at_ready: tuple[dict[str, Any], ...] = ()
    """The GPUs read when the new setting's server answered ready (`status --json`'s shape)."""
    gpus_at_crash: tuple[dict[str, Any], ...] = ()
    """The GPUs read right after the crash."""

    @property
    def ok(self) -> bool:
        return self.outcome is RolloutOutcome.APPLIED

    def summary(self) -> str:
        """One line for the audit log: `rolled back: illegal_memory_access during …`."""
        text = self.outcome.value + (f": {self.reason}" if self.reason else "")
        return text + (f"; rollback: {self.rollback_error}" if self.rollback_error else "")


RolloutEvent = RolloutProgress | RolloutJournal | RolloutFinished


class SnapshotStage(StrEnum):
    """The stages of one host's snapshot (console/package/snapshot.py), in order."""

    CONNECTING = "connecting"
    UNIT = "reading unit"
    JOURNAL = "reading journal"
    TRANSFER = "transferring"
    METADATA = "writing metadata"
    DONE = "done"
    FAILED = "failed"


@dataclass(frozen=True)
class SnapshotProgress:
    """Where one host's snapshot is: its stage, files placed and bytes transferred so far."""

    host: str
    stage: SnapshotStage
    files_done: int = 0
    files_total: int = 0
    """Artifacts of this snapshot (known once the bench globs are expanded)."""
    bytes_done: int = 0
    bytes_total: int = 0
    """Bytes to download: files already in the package are not fetched again."""
    current: str = ""
    """The package path being written, or the error when `stage` is FAILED."""


Event = HostStateChanged | JournalBatch | ServiceStatus | MonitorEvent | HealthChecked
"""What the fleet emits to its listeners. Actions report through their own callbacks: a
rollout's `RolloutEvent`s and a snapshot's `SnapshotProgress` go to whoever started them."""
