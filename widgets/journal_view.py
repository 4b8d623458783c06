"""The selected host's live journal: a bounded `Log`, written in batches, never per line."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

from textual.widgets import Log

MAX_LINE = 2000


def display_line(message: str) -> str:
    """One screen line: the last tqdm segment of `\\r` text, absurd lengths cut."""
    if "\r" in message:
        message = message.rstrip("\r").rsplit("\r", 1)[-1]
    if len(message) > MAX_LINE:
        message = message[:MAX_LINE] + " …"
    return message


class JournalView(Log):
    """Shows one host at a time; each host's lines are kept in its own ring buffer."""

    DEFAULT_CSS = """
    JournalView { border: round $primary-background; height: 1fr; }
    """

    def __init__(self, buffer_lines: int = 5000, **kwargs: object) -> None:
        super().__init__(max_lines=buffer_lines, highlight=False, auto_scroll=True, **kwargs)  # type: ignore[arg-type]
        self.buffer_lines = buffer_lines
        self.buffers: dict[str, deque[str]] = {}
        self.host: str | None = None
        self._pending: list[str] = []

    def add(self, host: str, lines: Iterable[str]) -> None:
        buffer = self.buffers.setdefault(host, deque(maxlen=self.buffer_lines))
        shown = [display_line(line) for line in lines]
        buffer.extend(shown)
        if host == self.host:
            self._pending.extend(shown)

    def flush(self) -> None:
        """Called on a timer: one write for everything that arrived since the last frame."""
        if self._pending:
            pending, self._pending = self._pending[-self.buffer_lines :], []
            self.write_lines(pending)

    def show_host(self, host: str) -> None:
        self.host = host
        self._pending.clear()
        self.clear()
        self.border_title = f"journal · {host}"
        self.write_lines(list(self.buffers.get(host, ())))
