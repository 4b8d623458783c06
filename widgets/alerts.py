"""`A`: every crash seen since the console started, newest first, with the flags that ran;
below them, the hosts a change did not finish on and what each is left on.

A crash notification disappears after a while; this list does not, so "which setting killed
it at 03:12?" still has an answer in the morning.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.message import Message
from textual.widgets import DataTable, Static

from console.hosts.events import CrashDetected
from console.hosts.profiles import FlagValue
from console.tuning.left_on import LeftOnFound
from console.watch.xid_reader import XidSeen
from widgets.dialog import Dialog


class LeftOnUpdated(Message):
    """The engine found a host left on a change that did not finish (tuning/left_on.py)."""

    def __init__(self, event: LeftOnFound) -> None:
        super().__init__()
        self.event = event


def format_flags(flags: dict[str, FlagValue] | None) -> str:
    if flags is None:
        return "unknown"
    shown = []
    for name, value in flags.items():
        if isinstance(value, bool):
            value = "on" if value else "off"
        shown.append(f"{name}={value}")
    return " ".join(shown) or "-"


def alert_text(crash: CrashDetected) -> str:
    """The notification body: what, where, with which flags."""
    run = (crash.invocation or "?")[:12]
    when = f", at {_when(crash.timestamp)} while idle, read back" if crash.read_back else ""
    return (
        f"{crash.host}: {crash.signature} (run {run}{when})\n"
        f"{crash.line}\nflags: {format_flags(crash.flags)}"
    )


def _when(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp).strftime("%m-%d %H:%M:%S")


class AlertsScreen(Dialog[None]):
    DEFAULT_CSS = """
    AlertsScreen { align: center middle; }
    AlertsScreen > Vertical {
        width: 90%; height: auto; max-height: 90%;
        border: round $error; background: $surface; padding: 0 1;
    }
    AlertsScreen DataTable { height: auto; max-height: 30; }
    AlertsScreen .hint { color: $text-muted; }
    AlertsScreen #alert-detail { height: auto; padding: 1 0 0 0; }
    """
    BINDINGS = [Binding("escape,A,q", "dismiss", "Close", id="alerts-close")]

    def __init__(
        self,
        crashes: Iterable[CrashDetected],
        left_on: Iterable[LeftOnFound] = (),
        xids: Iterable[XidSeen] = (),
    ) -> None:
        super().__init__()
        self.crashes = sorted(crashes, key=lambda c: c.timestamp, reverse=True)
        self.left_on = sorted(left_on, key=lambda f: f.timestamp, reverse=True)
        self.xids = sorted(xids, key=lambda x: x.time, reverse=True)

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(f"[b]crash alerts[/b] ({len(self.crashes)})")
            table: DataTable[str] = DataTable(cursor_type="row", zebra_stripes=True)
            table.add_columns("time", "host", "run", "signature", "flags", "line")
            for crash in self.crashes:
                when = _when(crash.timestamp)
                older = (
                    " (read back)" if crash.read_back else "" if crash.live else " (before start)"
                )
                table.add_row(
                    when + older,
                    crash.host,
                    (crash.invocation or "?")[:12],
                    crash.signature,
                    format_flags(crash.flags),
                    crash.line[:160],
                )
            yield table
            # The highlighted alert in full, wrapped: on 80 columns the flags column ends
            # after its first words (`budget=3` for budget=32).
            yield Static("", id="alert-detail")
            if self.left_on:
                yield Static(f"[b]left on an unfinished change[/b] ({len(self.left_on)})")
                lines = [f"{_when(f.timestamp)}  {f.text()}" for f in self.left_on]
                yield Static(Text("\n".join(lines)), id="alert-left-on")
            if self.xids:
                yield Static(f"[b]GPU driver errors (Xid)[/b] ({len(self.xids)})")
                lines = [f"{x.host}: {x.text()}" for x in self.xids]
                yield Static(Text("\n".join(lines)), id="alert-xids")
            yield Static("escape: close", classes="hint")

    def on_mount(self) -> None:
        self.query_one(DataTable).focus()
        if self.crashes:
            self._detail(0)

    @on(DataTable.RowHighlighted)
    def _highlighted(self, message: DataTable.RowHighlighted) -> None:
        self._detail(message.cursor_row)

    def _detail(self, row: int) -> None:
        if 0 <= row < len(self.crashes):
            crash = self.crashes[row]
            near = [x for x in self.xids if x.host == crash.host and x.near(crash.timestamp)]
            text = "\n".join([alert_text(crash), *(x.text() for x in near)])
            self.query_one("#alert-detail", Static).update(Text(text))
