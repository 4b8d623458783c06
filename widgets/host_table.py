"""The fleet table: one row per host with its connection, unit and flag state.

Drawn line by line (Textual's line API), with each row's strip kept until that row changes:
the numbers of every streaming host change four times a second, and a DataTable rendered
every cell of every row again for each change (10–40 ms of a frame with 8 hosts streaming,
the frames a key press then waited behind).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rich.cells import cell_len
from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import Binding
from textual.geometry import Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from console.events import ServiceStatus
from console.profiles import FlagValue
from console.transport.ssh import ConnState, HostState

STATE_STYLE = {
    ConnState.CONNECTED: "green",
    ConnState.CONNECTING: "yellow",
    ConnState.RECONNECTING: "yellow",
    ConnState.UNREACHABLE: "red",
    ConnState.HOST_KEY_REFUSED: "bold red",
    ConnState.CLOSED: "dim",
}

COLUMNS = (
    "#",
    "host",
    "connection",
    "health",
    "unit",
    "budget",
    "topk",
    "graph",
    "nvls",
    "accept",
    "tok/s",
    "age",
    "restarts",
    "alerts",
    "sglang",
)
DROP_ORDER = ("sglang", "nvls", "topk", "graph", "budget", "#", "restarts", "unit", "age", "alerts")
"""Columns given up, in this order, when the table is narrower than all of them: host,
connection, health, accept and tok/s stay (at 80 columns they are what an operator reads)."""
HEALTH_STYLE = {"ok": "green", "closed": "yellow"}
"""Any other answer (`503`, `timeout`, `error`, `unreachable`) is drawn in red."""


def age_text(seconds: float) -> str:
    """`4s`, `2m05`, `3h12`: the age of the newest decode line, short enough for a column."""
    s = int(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}"
    return f"{s // 3600}h{s // 60 % 60:02d}"


SOURCE_MARK = {"/metrics": "m", "prometheus": "p"}
"""The mark after a number that did not come from the journal (the journal's have none)."""


@dataclass
class HostRow:
    index: int
    name: str
    state: HostState | None = None
    status: ServiceStatus | None = None
    accept_len: float | None = None
    throughput: float | None = None
    graph: bool | None = None
    """CUDA-graph state of the newest decode batch (None: no decode line yet this run)."""
    health: str | None = None
    """The server's `/health` answer (`ok`, `503`, `timeout`, `closed`, …); None: not asked."""
    age_s: float | None = None
    """Age of this run's newest decode line; None before its first one."""
    stale: bool = False
    """No decode line for longer than the host's own rhythm allows: the numbers are old."""
    source: str = "journal"
    """Where accept / tok/s came from: `journal`, `/metrics` or `prometheus` (marked m / p)."""
    crashed: bool = False
    """A crash signature was seen and no later run has logged ready yet."""
    alerts: int = 0
    """Crash alerts for this host since the console started (the list is `A`)."""
    seen: int = 0
    """Alerts the operator has seen (opening the list with `A` marks them all)."""
    restarts: int = 0
    """Restarts within the last ten minutes (console/watch/restarts.py)."""
    looping: bool = False
    """Crash-looping: shown as such, in red, until the host has stayed up a while."""
    extra: dict[str, str] = field(default_factory=dict)


def _flag(value: FlagValue) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "on" if value else "off"
    return str(value)


def _alerts(row: HostRow) -> Text | str:
    """Unseen alerts in red; once seen (`A`), the total with a tick, dimmed."""
    unseen = row.alerts - row.seen
    if unseen > 0:
        return Text(str(unseen), style="bold red")
    return Text(f"{row.alerts} ✓", style="dim") if row.alerts else "-"


class HostTable(ScrollView, can_focus=True):
    """Hosts in profile order under a fixed header; `1`–`9` in the app select them."""

    BINDINGS = [
        Binding("up", "cursor_up", "previous host", show=False, id="hosts-up"),
        Binding("down", "cursor_down", "next host", show=False, id="hosts-down"),
        Binding("home", "cursor_first", "first host", show=False, id="hosts-first"),
        Binding("end", "cursor_last", "last host", show=False, id="hosts-last"),
    ]
    COMPONENT_CLASSES = {
        "host-table--header",
        "host-table--cursor",
        "host-table--even-row",
        "host-table--crashed",
        "host-table--stale",
    }
    DEFAULT_CSS = """
    HostTable { height: auto; max-height: 12; background: $surface; color: $foreground; }
    HostTable > .host-table--header { text-style: bold; background: $panel; color: $foreground; }
    HostTable > .host-table--even-row { background: $surface-lighten-1 50%; }
    HostTable:dark > .host-table--even-row { background: $surface-darken-1 40%; }
    HostTable > .host-table--cursor {
        background: $block-cursor-blurred-background;
        color: $block-cursor-blurred-foreground;
        text-style: $block-cursor-blurred-text-style;
    }
    HostTable:focus > .host-table--cursor {
        background: $block-cursor-background;
        color: $block-cursor-foreground;
        text-style: $block-cursor-text-style;
    }
    HostTable > .host-table--crashed { color: $error; text-style: bold; }
    HostTable > .host-table--stale { color: $text-disabled; }
    HostTable.-crashed { border: round $error; }
    """

    class RowHighlighted(Message):
        """The cursor moved to another host."""

        def __init__(self, table: HostTable, host: str, cursor_row: int) -> None:
            super().__init__()
            self.table = table
            self.host = host
            self.cursor_row = cursor_row

        @property
        def control(self) -> HostTable:
            return self.table

    def __init__(self, names: list[str], **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.rows_by_name = {n: HostRow(i + 1, n) for i, n in enumerate(names)}
        self.names = list(names)
        self.cursor_row = 0
        self._cells_by_name: dict[str, list[Text | str]] = {}
        self._versions = dict.fromkeys(names, 0)
        self._widths = [cell_len(c) for c in COLUMNS]
        self._shown = list(range(len(COLUMNS)))
        """Indexes of the columns that fit the table's width (see DROP_ORDER)."""
        self._strips: dict[str, tuple[tuple[object, ...], Strip]] = {}
        """Each row's rendered strip and what it was rendered with."""

    def on_mount(self) -> None:
        for name in self.names:
            self._set_cells(name)
        self._resize()
        if self.names:  # the first host is current from the start, as with a cursor move
            self.post_message(self.RowHighlighted(self, self.names[0], 0))

    # --- rows --------------------------------------------------------------------------

    def _cells(self, row: HostRow) -> list[Text | str]:
        state = row.state
        if state is None:
            conn = Text("connecting", style="yellow")
        else:
            conn = Text(state.state.value, style=STATE_STYLE[state.state])
        status = row.status
        flags = status.flags if status is not None else {}
        if status is None:
            unit: Text | str = "-"
        elif status.error:
            unit = Text("error", style="red")
        else:
            style = {"active": "green", "failed": "bold red"}.get(status.active_state, "yellow")
            unit = Text(f"{status.active_state}/{status.sub_state}", style=style)
        if row.looping:  # not the flicker between running and auto-restart
            unit = Text("crash-loop", style="bold red")
        accept: Text | str = f"{row.accept_len:.2f}" if row.accept_len is not None else "-"
        tps: Text | str = f"{row.throughput:.0f}" if row.throughput is not None else "-"
        age: Text | str = "-" if row.age_s is None else age_text(row.age_s)
        if row.stale:  # the numbers of a run that stopped logging: never shown as live
            old = self.get_component_rich_style("host-table--stale", partial=True)
            accept, tps = Text(str(accept), style=old), Text(str(tps), style=old)
            age = Text(str(age), style="bold yellow")
        health: Text | str = "-"
        if row.health is not None:
            health = Text(row.health, style=HEALTH_STYLE.get(row.health, "bold red"))
        if row.accept_len is not None and row.source in SOURCE_MARK:
            accept = Text.assemble(accept, (f" {SOURCE_MARK[row.source]}", "dim"))
        # What the server did beats what the flags asked for (graphs can silently fall back).
        graph = row.graph if row.graph is not None else flags.get("cuda_graph")
        cells: list[Text | str] = [
            str(row.index),
            row.name,
            conn,
            health,
            unit,
            _flag(flags.get("budget")),
            _flag(flags.get("topk")),
            _flag(graph),
            _flag(flags.get("nvls")),
            accept,
            tps,
            age,
            str(row.restarts) if row.restarts else "-",
            _alerts(row),
            # last: at 80 columns the numbers that change matter more than the release
            (status.sglang_version or "-") if status is not None else "-",
        ]
        if row.crashed or row.looping:
            alarm = self.get_component_rich_style("host-table--crashed", partial=True)
            cells = [Text(c.plain if isinstance(c, Text) else c, style=alarm) for c in cells]
        return cells

    def _set_cells(self, name: str) -> bool:
        """Keep the row's new cells; True when a column had to widen."""
        cells = self._cells(self.rows_by_name[name])
        self._cells_by_name[name] = cells
        self._versions[name] += 1
        wider = False
        for i, cell in enumerate(cells):
            width = cell.cell_len if isinstance(cell, Text) else cell_len(cell)
            if width > self._widths[i]:
                self._widths[i] = width
                wider = True
        return wider

    def _resize(self) -> None:
        self._strips.clear()
        self._shown = self._fitting(self.size.width)
        width = sum(self._widths[i] + 2 for i in self._shown)
        self.virtual_size = Size(width, len(self.names) + 1)
        self.refresh()

    def _fitting(self, available: int) -> list[int]:
        """The columns to draw in `available` cells (all of them before the first layout)."""
        shown = list(range(len(COLUMNS)))
        if available <= 0:
            return shown
        for name in DROP_ORDER:
            if sum(self._widths[i] + 2 for i in shown) <= available:
                break
            shown.remove(COLUMNS.index(name))
        return shown

    @property
    def shown_columns(self) -> list[str]:
        return [COLUMNS[i] for i in self._shown]

    def on_resize(self, event: events.Resize) -> None:
        if self._fitting(event.size.width) != self._shown:
            self._resize()

    def refresh_host(self, name: str) -> None:
        if self._set_cells(name):
            self._resize()  # a column widened: every row is drawn again
            return
        self._refresh_row(self.rows_by_name[name].index - 1)

    def _refresh_row(self, index: int) -> None:
        """Repaint one host's line, if it is on screen (line 0 is the header)."""
        y = index + 1 - self.scroll_offset.y
        if 1 <= y < self.size.height:
            self.refresh_line(y)

    def set_state(self, state: HostState) -> None:
        self.rows_by_name[state.host].state = state
        self.refresh_host(state.host)

    def set_status(self, status: ServiceStatus) -> None:
        self.rows_by_name[status.host].status = status
        self.refresh_host(status.host)

    def set_metrics(
        self,
        name: str,
        accept_len: float | None,
        throughput: float | None,
        graph: bool | None = None,
        source: str = "journal",
    ) -> None:
        row = self.rows_by_name[name]
        row.source = source
        row.accept_len = accept_len if accept_len is not None else row.accept_len
        row.throughput = throughput if throughput is not None else row.throughput
        row.graph = graph if graph is not None else row.graph
        self.refresh_host(name)

    def set_health(self, name: str, health: str) -> None:
        self.rows_by_name[name].health = health
        self.refresh_host(name)

    def set_freshness(self, name: str, age_s: float | None, stale: bool) -> None:
        """The age of the newest decode line, redrawn only when its text or state changes."""
        row = self.rows_by_name[name]
        shown = None if row.age_s is None else age_text(row.age_s)
        if (shown, row.stale) == (None if age_s is None else age_text(age_s), stale):
            row.age_s = age_s
            return
        row.age_s, row.stale = age_s, stale
        self.refresh_host(name)

    def visible_names(self) -> frozenset[str]:
        """The hosts whose rows are on screen now."""
        top = self.scroll_offset.y
        rows = max(1, self.size.height - 1)
        return frozenset(self.names[top : top + rows])

    def new_run(self, name: str) -> None:
        """The service restarted: the live numbers belong to the previous run."""
        row = self.rows_by_name[name]
        row.accept_len = row.throughput = row.graph = row.age_s = None
        row.stale = False
        self.refresh_host(name)

    def set_crashed(self, name: str, crashed: bool) -> None:
        row = self.rows_by_name[name]
        row.alerts += crashed
        row.crashed = crashed
        self.refresh_host(name)
        self._alarm_border()

    def _alarm_border(self) -> None:
        rows = self.rows_by_name.values()
        self.set_class(any(r.crashed or r.looping for r in rows), "-crashed")

    def set_restarts(self, name: str, recent: int, looping: bool) -> None:
        row = self.rows_by_name[name]
        if (row.restarts, row.looping) == (recent, looping):
            return
        row.restarts, row.looping = recent, looping
        self.refresh_host(name)
        self._alarm_border()

    def mark_seen(self) -> None:
        """Every alert so far has been seen: the counts stop shouting."""
        for name, row in self.rows_by_name.items():
            if row.seen != row.alerts:
                row.seen = row.alerts
                self.refresh_host(name)

    # --- cursor ------------------------------------------------------------------------

    def move_cursor(self, *, row: int) -> None:
        """Put the cursor on the row-th host (clamped) and scroll it into view."""
        row = max(0, min(row, len(self.names) - 1))
        if row == self.cursor_row or not self.names:
            return
        old, self.cursor_row = self.cursor_row, row
        visible = max(1, self.size.height - 1)  # lines under the header
        top = self.scroll_offset.y
        if row < top:
            self.scroll_to(y=row, animate=False)
        elif row >= top + visible:
            self.scroll_to(y=row - visible + 1, animate=False)
        self._refresh_row(old)
        self._refresh_row(row)
        self.post_message(self.RowHighlighted(self, self.names[row], row))

    def action_cursor_up(self) -> None:
        self.move_cursor(row=self.cursor_row - 1)

    def action_cursor_down(self) -> None:
        self.move_cursor(row=self.cursor_row + 1)

    def action_cursor_first(self) -> None:
        self.move_cursor(row=0)

    def action_cursor_last(self) -> None:
        self.move_cursor(row=len(self.names) - 1)

    def on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)
        if offset is not None and offset.y >= 1:
            self.move_cursor(row=offset.y - 1 + self.scroll_offset.y)

    # --- drawing -----------------------------------------------------------------------

    def _line(self, cells: list[Text | str] | tuple[str, ...], base: Style) -> Strip:
        text = Text(no_wrap=True, end="")
        for i in self._shown:
            cell, width = cells[i], self._widths[i]
            text.append(" ")
            if isinstance(cell, Text):
                text.append_text(cell)
                pad = width - cell.cell_len
            else:
                text.append(cell)
                pad = width - cell_len(cell)
            text.append(" " * (pad + 1))
        return Strip(text.render(self.app.console)).apply_style(base)

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        width = self.size.width
        if y == 0:
            style = self.get_component_rich_style("host-table--header")
            strip = self._line(COLUMNS, style)
        elif 0 <= (index := y - 1 + scroll_y) < len(self.names):
            strip = self._row_strip(index)
        else:
            return Strip.blank(width, self.rich_style)
        return strip.crop_extend(scroll_x, scroll_x + width, self.rich_style)

    def _row_strip(self, index: int) -> Strip:
        name = self.names[index]
        if index == self.cursor_row:
            base = self.get_component_rich_style("host-table--cursor")
        elif index % 2:
            base = self.get_component_rich_style("host-table--even-row")
        else:
            base = self.rich_style
        key = (self._versions[name], base)
        cached = self._strips.get(name)
        if cached is not None and cached[0] == key:
            return cached[1]
        strip = self._line(self._cells_by_name[name], base)
        self._strips[name] = (key, strip)
        return strip
