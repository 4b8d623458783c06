"""Textual messages carrying the engine's domain events into the widget tree.

Journal batches and metric updates do not travel as messages: they are many, and the app
drains them on its timers (console/ui/engine_bridge.py, monitoring.py) so that keys never
queue behind them.
"""

from __future__ import annotations

from textual.message import Message

from console.hosts.events import (
    CrashDetected,
    HealthChecked,
    HostStateChanged,
    InvocationChanged,
    ServiceReady,
    ServiceStatus,
    SnapshotProgress,
)
from console.package.snapshot import SnapshotReport
from console.watch.gpu_reader import GpuReading


class HostStateUpdated(Message):
    def __init__(self, event: HostStateChanged) -> None:
        super().__init__()
        self.event = event


class ServiceStatusUpdated(Message):
    def __init__(self, event: ServiceStatus) -> None:
        super().__init__()
        self.event = event


class HealthUpdated(Message):
    def __init__(self, event: HealthChecked) -> None:
        super().__init__()
        self.event = event


class GpusUpdated(Message):
    """A host's GPUs were read (or could not be: the reading says why)."""

    def __init__(self, reading: GpuReading) -> None:
        super().__init__()
        self.reading = reading


class CrashReceived(Message):
    def __init__(self, event: CrashDetected) -> None:
        super().__init__()
        self.event = event


class RunChanged(Message):
    """The service restarted or logged its ready marker."""

    def __init__(self, event: InvocationChanged | ServiceReady) -> None:
        super().__init__()
        self.event = event


class SnapshotProgressed(Message):
    def __init__(self, event: SnapshotProgress) -> None:
        super().__init__()
        self.event = event

    def can_replace(self, message: Message) -> bool:
        # Only the newest state of a host matters; a burst of byte counts collapses to one.
        return isinstance(message, SnapshotProgressed) and message.event.host == self.event.host


class SnapshotFinished(Message):
    def __init__(self, report: SnapshotReport | None, error: str | None = None) -> None:
        super().__init__()
        self.report = report
        self.error = error
        """Set when the snapshot itself broke (the report is then None)."""
