"""The fleet table: one row per host with its connection, unit and flag state.

Drawn line by line (Textual's line API), with each row's strip kept until that row changes:
the numbers of every streaming host change four times a second, and a DataTable rendered
every cell of every row again for each change (10–40 ms of a frame with 8 hosts streaming,
the frames a key press then waited behind).

Past 500 lines because drawing, the cursor, the marks, sorting and the column fit all work on
the one line cache; what a row knows and the order of the rows are in widgets/fleet_rows.py.
"""

from __future__ import annotations

from collections.abc import Mapping

from rich.cells import cell_len
from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import Binding
from textual.geometry import Region, Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from console.fleet.filter import NO_FILTER, FleetFilter
from console.hosts.events import ServiceStatus
from console.hosts.profiles import FlagValue
from console.transport.ssh import ConnState, HostState
from console.watch.gpus import GpuState, compact, slowed_on
from widgets.fleet_rows import (
    COLUMNS,
    GroupLine,
    GroupSummary,
    HostRow,
    Line,
    arrange,
    summarise,
)

STATE_STYLE = {
    ConnState.CONNECTED: "green",
    ConnState.CONNECTING: "yellow",
    ConnState.RECONNECTING: "yellow",
    ConnState.UNREACHABLE: "red",
    ConnState.HOST_KEY_REFUSED: "bold red",
    ConnState.CLOSED: "dim",
    ConnState.IDLE: "dim",
}

DROP_ORDER = (
    "sglang", "gpu", "nvls", "topk", "graph", "budget", "#", "restarts", "unit", "age", "alerts"
)  # fmt: skip
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


def _flag(value: FlagValue) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "on" if value else "off"
    return str(value)


def _gpu(row: HostRow) -> Text | str:
    """The fullest GPU's memory and the mean utilization; yellow when a GPU is held down."""
    if not row.gpus:
        return "-"
    text = compact(row.gpus)
    return Text(text, style="yellow") if slowed_on(row.gpus) else text


def _alerts(row: HostRow) -> Text | str:
    """Unseen alerts in red; once seen (`A`), the total with a tick, dimmed."""
    unseen = row.alerts - row.seen
    if unseen > 0:
        return Text(str(unseen), style="bold red")
    return Text(f"{row.alerts} ✓", style="dim") if row.alerts else "-"


class HostTable(ScrollView, can_focus=True):
    """Hosts under a fixed header, in profile order until the operator sorts, filters or
    groups them (`o`/`O`, `F`, `g` in the app); `1`–`9` in the app select by `#`."""

    BINDINGS = [
        Binding("up", "cursor_up", "previous host", show=False, id="hosts-up"),
        Binding("down", "cursor_down", "next host", show=False, id="hosts-down"),
        Binding("home", "cursor_first", "first host", show=False, id="hosts-first"),
        Binding("end", "cursor_last", "last host", show=False, id="hosts-last"),
        Binding("pagedown", "page(1)", "next page of hosts", show=False, id="hosts-page-down"),
        Binding("pageup", "page(-1)", "previous page of hosts", show=False, id="hosts-page-up"),
    ]
    COMPONENT_CLASSES = {
        "host-table--header",
        "host-table--cursor",
        "host-table--even-row",
        "host-table--crashed",
        "host-table--stale",
        "host-table--group",
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
    HostTable > .host-table--group { text-style: bold; background: $primary 15%; }
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

    class Scrolled(Message):
        """Other rows came on screen (the app opens their hosts in on-demand mode)."""

        def __init__(self, table: HostTable) -> None:
            super().__init__()
            self.table = table

        @property
        def control(self) -> HostTable:
            return self.table

    def __init__(
        self,
        names: list[str],
        groups: Mapping[str, tuple[str, ...]] | None = None,
        **kwargs: object,
    ) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        groups = groups or {}
        self.rows_by_name = {
            n: HostRow(i + 1, n, tuple(groups.get(n, ()))) for i, n in enumerate(names)
        }
        self.order = list(names)
        """Every host, in profile order (`#`)."""
        self.names = list(names)
        """The hosts shown, in the order shown: what the cursor moves over."""
        self._lines: list[Line] = list(names)
        self._line_of: dict[Line, int] = {n: i for i, n in enumerate(names)}
        self._members: dict[str, list[str]] = {}
        self._summaries: dict[str, GroupSummary] = {}
        self._dirty_groups: set[str] = set()
        """Groups whose aggregate is counted again when their line is next drawn."""
        self._stale_cells: set[str] = set()
        """Hosts off screen whose row changed: their cells are built when next drawn."""
        self.host_filter = NO_FILTER
        self.sort_column = "#"
        self.sort_reverse = False
        self.grouped = False
        self.cursor_row = 0
        self._cells_by_name: dict[Line, list[Text | str]] = {}
        self._versions: dict[Line, int] = dict.fromkeys(names, 0)
        self._cell_widths = [cell_len(c) for c in COLUMNS]
        """Each column's widest cell so far (a column never narrows as numbers change)."""
        self._widths = list(self._cell_widths)
        """Each column's width as drawn: its widest cell or its header label, whichever is
        wider (a filter's `12/200` widens the header only while it is set)."""
        self._shown = list(range(len(COLUMNS)))
        """Indexes of the columns that fit the table's width (see DROP_ORDER)."""
        self._strips: dict[Line, tuple[tuple[object, ...], Strip]] = {}
        """Each line's rendered strip and what it was rendered with."""

    def on_mount(self) -> None:
        for name in self.order:
            self._set_cells(name)
        self._resize()
        if self.names:  # the first host is current from the start, as with a cursor move
            self.post_message(self.RowHighlighted(self, self.names[0], 0))

    @property
    def cursor_host(self) -> str | None:
        """The host under the cursor (None when the filter shows none)."""
        return self.names[self.cursor_row] if self.names else None

    @property
    def groups(self) -> list[str]:
        """Every fleet group a host is in, at any depth."""
        return sorted({g for r in self.rows_by_name.values() for g in r.groups})

    # --- order: filter, sort, group ----------------------------------------------------

    def set_filter(self, query: FleetFilter) -> None:
        self.host_filter = query
        self.rearrange(force=True)

    def set_grouped(self, grouped: bool) -> None:
        self.grouped = grouped
        self.rearrange(force=True)

    def cycle_sort(self) -> None:
        """Sort by the next column shown (after the last, back to profile order)."""
        shown = [COLUMNS[i] for i in self._shown]
        current = shown.index(self.sort_column) if self.sort_column in shown else -1
        self.sort_column = shown[(current + 1) % len(shown)]
        self.sort_reverse = False
        self.rearrange(force=True)

    def reverse_sort(self) -> None:
        self.sort_reverse = not self.sort_reverse
        self.rearrange(force=True)

    @property
    def arranged(self) -> bool:
        """Whether the order can change with the hosts' state (then the app calls
        `rearrange` every second: a sort by tok/s follows the numbers)."""
        return not self.host_filter.empty or self.sort_column != "#" or self.grouped

    def rearrange(self, *, force: bool = False) -> bool:
        """Lay the lines out again; the cursor stays on its host while it is shown.

        True when the lines changed (then everything is drawn again); `force` redraws the
        header (the sort mark, the filter's count) even when they did not."""
        layout = arrange(
            self.rows_by_name, self.host_filter, self.sort_column, self.sort_reverse, self.grouped
        )
        self._members = layout.members
        self._dirty_groups.update(layout.members)
        if layout.lines == self._lines:
            for group in layout.members:
                self._refresh_line(GroupLine(group))
            if force:
                self._resize()
            return False
        current = self.cursor_host
        self.names, self._lines = layout.hosts, layout.lines
        self._line_of = {line: i for i, line in enumerate(self._lines)}
        if current in self._line_of:
            self.cursor_row = self.names.index(current)
        else:
            self.cursor_row = 0
        self._resize()
        self._scroll_to_cursor()
        if self.cursor_host is not None and self.cursor_host != current:
            self.post_message(self.RowHighlighted(self, self.cursor_host, self.cursor_row))
        return True

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
        if row.campaign is not None:  # restarts are the campaign's cells, not trouble
            unit = Text("campaign", style="bold magenta")
        if row.looping:  # not the flicker between running and auto-restart
            unit = Text("crash-loop", style="bold red")
        accept: Text | str = f"{row.accept_len:.2f}" if row.accept_len is not None else "-"
        tps: Text | str = f"{row.throughput:.0f}" if row.throughput is not None else "-"
        age: Text | str = "-" if row.age_s is None else age_text(row.age_s)
        old = self.get_component_rich_style("host-table--stale", partial=True)
        if row.stale:  # the numbers of a run that stopped logging: never shown as live
            accept, tps = Text(str(accept), style=old), Text(str(tps), style=old)
            late: str | Style = "bold yellow" if not row.idle else old  # idle: expected
            age = Text(str(age), style=late)
        health: Text | str = "-"
        if row.health is not None:
            answer: str | Style = HEALTH_STYLE.get(row.health, "bold red")
            health = Text(row.health, style=old if row.idle else answer)  # idle: the last, dim
        if row.accept_len is not None and row.source in SOURCE_MARK:
            accept = Text.assemble(accept, (f" {SOURCE_MARK[row.source]}", "dim"))
        # What the server did beats what the flags asked for (graphs can silently fall back).
        graph = row.graph if row.graph is not None else flags.get("cuda_graph")
        name: Text | str = Text.assemble(("● ", "bold cyan"), row.name) if row.marked else row.name
        cells: list[Text | str] = [
            str(row.index),
            name,
            conn,
            health,
            unit,
            _flag(flags.get("budget")),
            _flag(flags.get("topk")),
            _flag(graph),
            _flag(flags.get("nvls")),
            accept,
            tps,
            _gpu(row),
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

    def _group_cells(self, group: str, summary: GroupSummary) -> list[Text | str]:
        """A group's aggregate, in the columns its hosts' numbers are in."""
        up = Text(
            f"{summary.up}/{summary.hosts} up" + (f" {summary.idle} idle" if summary.idle else ""),
            style="green" if summary.up + summary.idle == summary.hosts else "bold red",
        )
        if summary.unseen:
            alerts: Text | str = Text(str(summary.unseen), style="bold red")
        else:
            alerts = Text(f"{summary.alerts} ✓", style="dim") if summary.alerts else "-"
        cells: dict[str, Text | str] = {
            "host": f"▾ {group or 'ungrouped'}",
            "connection": up,
            "accept": "-" if summary.accept_len is None else f"{summary.accept_len:.2f} μ",
            "tok/s": "-" if summary.throughput is None else f"{summary.throughput:.0f} Σ",
            "restarts": str(summary.restarts) if summary.restarts else "-",
            "alerts": alerts,
        }
        return [cells.get(column, "") for column in COLUMNS]

    def _set_group_cells(self, group: str) -> bool:
        """Recount a group; True when a column had to widen."""
        self._dirty_groups.discard(group)
        summary = summarise(self.rows_by_name[n] for n in self._members.get(group, ()))
        if self._summaries.get(group) == summary:
            return False
        self._summaries[group] = summary
        return self._keep(GroupLine(group), self._group_cells(group, summary))

    def _set_cells(self, name: str) -> bool:
        """Keep the row's new cells; True when a column had to widen."""
        return self._keep(name, self._cells(self.rows_by_name[name]))

    def _keep(self, line: Line, cells: list[Text | str]) -> bool:
        self._cells_by_name[line] = cells
        self._versions[line] = self._versions.get(line, 0) + 1
        wider = False
        for i, cell in enumerate(cells):
            width = cell.cell_len if isinstance(cell, Text) else cell_len(cell)
            if width > self._cell_widths[i]:
                self._cell_widths[i] = width
                wider = True
        return wider

    def _header(self) -> list[str]:
        labels = list(COLUMNS)
        if self.sort_column != "#" or self.sort_reverse:
            i = COLUMNS.index(self.sort_column)
            labels[i] += " ▼" if self.sort_reverse else " ▲"
        if not self.host_filter.empty:
            labels[1] += f" {len(self.names)}/{len(self.order)}"
        return labels

    def _resize(self) -> None:
        self._strips.clear()
        header = self._header()
        self._widths = [max(w, cell_len(h)) for w, h in zip(self._cell_widths, header, strict=True)]
        self._shown = self._fitting(self.scrollable_content_region.width)
        width = self._drawn_width(self._shown)
        before, after = self.virtual_size.height, len(self._lines) + 1
        self.virtual_size = Size(width, after)
        # The table's height follows its number of lines up to its max-height; a layout of
        # the screen (the journal below it too) is needed only when the height changes.
        capped = before > self.size.height and after >= self.size.height
        self.refresh(layout=before != after and not capped)

    def fit_widths(self) -> bool:
        """Narrow the columns to their widest current cell when that brings a dropped column
        back (a long unit state, `deactivating/stop-sigterm`, once pushed `unit` and
        `restarts` off an 80-column table for good). Otherwise widths stay: numbers that
        shrink by a digit do not make the columns jump. True when it narrowed them."""
        if len(self._shown) == len(COLUMNS):
            return False
        widths = [cell_len(c) for c in COLUMNS]
        for cells in self._cells_by_name.values():
            for i, cell in enumerate(cells):
                width = cell.cell_len if isinstance(cell, Text) else cell_len(cell)
                widths[i] = max(widths[i], width)
        if widths == self._cell_widths:
            return False
        before, self._cell_widths = self._cell_widths, widths
        self._widths = [max(w, cell_len(h)) for w, h in zip(widths, self._header(), strict=True)]
        if len(self._fitting(self.scrollable_content_region.width)) <= len(self._shown):
            self._cell_widths = before  # nothing comes back: keep the columns still
            self._widths = [
                max(w, cell_len(h)) for w, h in zip(before, self._header(), strict=True)
            ]
            return False
        self._resize()
        return True

    def _fitting(self, available: int) -> list[int]:
        """The columns to draw in `available` cells (all of them before the first layout)."""
        shown = list(range(len(COLUMNS)))
        if available <= 0:
            return shown
        for name in DROP_ORDER:
            if self._drawn_width(shown) <= available:
                break
            shown.remove(COLUMNS.index(name))
        return shown

    def _drawn_width(self, columns: list[int]) -> int:
        """Cells a line takes: each column with a space either side, none after the last."""
        return sum(self._widths[i] + 2 for i in columns) - 1

    @property
    def shown_columns(self) -> list[str]:
        return [COLUMNS[i] for i in self._shown]

    def on_resize(self, event: events.Resize) -> None:
        # The width left beside the scrollbar: a column cut by it made a sideways scrollbar
        # that took one of the table's few rows at 80×24.
        if self._fitting(self.scrollable_content_region.width) != self._shown:
            self._resize()

    def refresh_host(self, name: str) -> None:
        group = self.rows_by_name[name].group
        if group in self._members:  # counted when drawn: only groups on screen cost anything
            self._dirty_groups.add(group)
            self._refresh_line(GroupLine(group))
        if self.is_mounted and self._screen_y(name) is None:
            # Its cells are built when it is next drawn: with 200 hosts, every row's age
            # changes every second, and building 190 rows nobody sees was most of that.
            self._stale_cells.add(name)
            return
        if self._set_cells(name):
            self._resize()  # a column widened: every row is drawn again
            return
        self._refresh_line(name)

    def _screen_y(self, line: Line) -> int | None:
        """Where `line` is drawn (screen line 0 is the header); None when not on screen."""
        at = self._line_of.get(line)
        if at is None:
            return None
        y = at + 1 - self.scroll_offset.y
        return y if 1 <= y < self.size.height else None

    def _refresh_line(self, line: Line) -> None:
        """Repaint one line, if it is shown and on screen.

        `y` is where it is drawn in the widget; ScrollView.refresh_line takes a line of the
        virtual size and subtracts the scroll offset: once the table was scrolled, a changed
        row repainted a line above it (or none), and kept showing its old state."""
        y = self._screen_y(line)
        if y is not None:
            self.refresh(Region(0, y, self.size.width, 1))

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

    def set_gpus(self, name: str, gpus: tuple[GpuState, ...]) -> None:
        row = self.rows_by_name[name]
        if row.gpus != gpus:
            row.gpus = gpus
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

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        if round(old_value) != round(new_value):
            self.post_message(self.Scrolled(self))

    def visible_names(self) -> frozenset[str]:
        """The hosts whose rows are on screen now."""
        return frozenset(self.rows_on_screen())

    def rows_on_screen(self) -> list[str]:
        """The hosts whose rows are on screen now, top row first."""
        top = self.scroll_offset.y
        rows = max(1, self.size.height - 1)
        return [n for n in self._lines[top : top + rows] if isinstance(n, str)]

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

    def set_campaign(self, name: str, campaign: str | None) -> None:
        """A tuning campaign owns the host now (its id and progress), or no longer (None)."""
        row = self.rows_by_name.get(name)
        if row is None or row.campaign == campaign:
            return
        row.campaign = campaign
        self.refresh_host(name)

    def set_restarts(self, name: str, recent: int, looping: bool) -> None:
        row = self.rows_by_name[name]
        if (row.restarts, row.looping) == (recent, looping):
            return
        row.restarts, row.looping = recent, looping
        self.refresh_host(name)
        self._alarm_border()

    # --- marks -------------------------------------------------------------------------

    @property
    def marked(self) -> list[str]:
        """The marked hosts, in profile order (`#`), shown or hidden by the filter."""
        return [n for n in self.order if self.rows_by_name[n].marked]

    def toggle_mark(self, name: str) -> None:
        row = self.rows_by_name[name]
        row.marked = not row.marked
        self.refresh_host(name)

    def mark_shown(self) -> list[str]:
        """Mark every host the table shows (a filter or a group picks them); when all of them
        are marked already, clear every mark instead. The hosts marked now."""
        clear = bool(self.names) and all(self.rows_by_name[n].marked for n in self.names)
        for name in self.order if clear else self.names:
            if self.rows_by_name[name].marked == (not clear):
                continue
            self.rows_by_name[name].marked = not clear
            self.refresh_host(name)
        return self.marked

    def mark_seen(self) -> None:
        """Every alert so far has been seen: the counts stop shouting."""
        for name, row in self.rows_by_name.items():
            if row.seen != row.alerts:
                row.seen = row.alerts
                self.refresh_host(name)

    # --- cursor ------------------------------------------------------------------------

    def move_cursor(self, *, row: int) -> None:
        """Put the cursor on the row-th host shown (clamped) and scroll it into view."""
        row = max(0, min(row, len(self.names) - 1))
        if row == self.cursor_row or not self.names:
            return
        old = self.names[self.cursor_row] if self.cursor_row < len(self.names) else None
        self.cursor_row = row
        self._scroll_to_cursor()
        if old is not None:
            self._refresh_line(old)
        self._refresh_line(self.names[row])
        self.post_message(self.RowHighlighted(self, self.names[row], row))

    def select_host(self, name: str) -> bool:
        """Put the cursor on `name`; False when the filter hides it."""
        if name not in self.names:
            return False
        self.move_cursor(row=self.names.index(name))
        return True

    def _scroll_to_cursor(self) -> None:
        if not self.names:
            return
        line = self._line_of[self.names[self.cursor_row]]
        visible = max(1, self.size.height - 1)  # lines under the header
        top = self.scroll_offset.y
        # the first host of a group brings its group's line into view with it
        first = line - (line > 0 and isinstance(self._lines[line - 1], GroupLine))
        if first < top:
            self.scroll_to(y=first, animate=False)
        elif line >= top + visible:
            self.scroll_to(y=line - visible + 1, animate=False)

    def action_cursor_up(self) -> None:
        self.move_cursor(row=self.cursor_row - 1)

    def action_cursor_down(self) -> None:
        self.move_cursor(row=self.cursor_row + 1)

    def action_page(self, direction: int) -> None:
        """A page of rows down (1) or up (-1): the view scrolls by a page and the cursor moves
        with it, keeping its place on screen (at the ends, to the first or last host)."""
        if not self.names:
            return
        visible = max(1, self.size.height - 1)
        top = self.scroll_offset.y
        self.scroll_to(y=max(0, min(top + direction * visible, self.max_scroll_y)), animate=False)
        line = self._line_of[self.names[self.cursor_row]] + direction * visible
        rows = range(len(self.names))
        if direction > 0:  # the first host at or below that line (group lines have none)
            row = next((i for i in rows if self._line_of[self.names[i]] >= line), rows[-1])
        else:
            row = next((i for i in reversed(rows) if self._line_of[self.names[i]] <= line), 0)
        self.move_cursor(row=row)

    def action_cursor_first(self) -> None:
        self.move_cursor(row=0)

    def action_cursor_last(self) -> None:
        self.move_cursor(row=len(self.names) - 1)

    def on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)
        if offset is None or offset.y < 1:
            return
        at = offset.y - 1 + self.scroll_offset.y
        if 0 <= at < len(self._lines) and isinstance(line := self._lines[at], str):
            self.select_host(line)

    # --- drawing -----------------------------------------------------------------------

    def _line(self, cells: list[Text | str] | list[str], base: Style) -> Strip:
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
            strip = self._line(self._header(), style)
        elif 0 <= (at := y - 1 + scroll_y) < len(self._lines):
            strip = self._line_strip(at)
        else:
            return Strip.blank(width, self.rich_style)
        return strip.crop_extend(scroll_x, scroll_x + width, self.rich_style)

    def _line_strip(self, at: int) -> Strip:
        line = self._lines[at]
        if isinstance(line, GroupLine):
            base = self.get_component_rich_style("host-table--group")
            if line.group in self._dirty_groups and self._set_group_cells(line.group):
                self.call_after_refresh(self._resize)  # an aggregate widened a column
        elif self.names and line == self.names[self.cursor_row]:
            base = self.get_component_rich_style("host-table--cursor")
        elif at % 2:
            base = self.get_component_rich_style("host-table--even-row")
        else:
            base = self.rich_style
        if isinstance(line, str) and line in self._stale_cells:
            self._stale_cells.discard(line)
            if self._set_cells(line):
                self.call_after_refresh(self._resize)  # the row widened a column
        key = (self._versions.get(line, 0), base)
        cached = self._strips.get(line)
        if cached is not None and cached[0] == key:
            return cached[1]
        strip = self._line(self._cells_by_name[line], base)
        self._strips[line] = (key, strip)
        return strip
