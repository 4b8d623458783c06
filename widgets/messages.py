"""Textual messages carrying the engine's domain events into the widget tree."""

from __future__ import annotations

from textual.message import Message

from console.events import HostStateChanged, JournalBatch, ServiceStatus


class HostStateUpdated(Message):
    def __init__(self, event: HostStateChanged) -> None:
        super().__init__()
        self.event = event


class ServiceStatusUpdated(Message):
    def __init__(self, event: ServiceStatus) -> None:
        super().__init__()
        self.event = event


class JournalReceived(Message):
    def __init__(self, event: JournalBatch) -> None:
        super().__init__()
        self.event = event
