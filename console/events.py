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


Event = HostStateChanged | JournalBatch | ServiceStatus
