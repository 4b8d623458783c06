"""The domain events the engine emits; the TUI turns them into messages, the CLI prints them.

Plain frozen dataclasses, past tense, no Textual. Each names its host.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from console.journal import JournalEntry
from console.ssh import HostState

FlagValue = int | float | str | bool | None


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


@dataclass(frozen=True)
class MetricsUpdated:
    """New numbers from a host's journal batch (console/monitor.py); the newest of each."""

    host: str
    timestamp: float
    """Journal time of the newest sample."""
    values: dict[str, float]
    """`accept_len`, `gen_throughput`, ... and the profile's `[[metrics]]` names."""
    graph: bool | None = None
    """Whether the newest decode batch ran in a CUDA (or NPU...) graph; None when unknown."""


@dataclass(frozen=True)
class CrashDetected:
    """A crash signature in a host's journal: what died, in which run, with which flags."""

    host: str
    invocation: str | None
    signature: str
    """A `console.signatures.CRASH_SIGNATURES` name, e.g. `illegal_memory_access`."""
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


@dataclass(frozen=True)
class InvocationChanged:
    """The service started a new run (`_SYSTEMD_INVOCATION_ID` changed in its journal)."""

    host: str
    invocation: str
    previous: str | None
    timestamp: float


@dataclass(frozen=True)
class ServiceReady:
    """The server logged its ready marker (`The server is fired up and ready to roll!`)."""

    host: str
    invocation: str | None
    timestamp: float


MonitorEvent = MetricsUpdated | CrashDetected | InvocationChanged | ServiceReady


Event = HostStateChanged | JournalBatch | ServiceStatus | MonitorEvent
