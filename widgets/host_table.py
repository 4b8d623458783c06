"""The fleet table: one row per host with its connection, unit and flag state."""

from __future__ import annotations

from dataclasses import dataclass, field

from rich.cells import cell_len
from rich.text import Text
from textual.cache import LRUCache
from textual.widgets import DataTable
from textual.widgets.data_table import ColumnKey

from console.events import FlagValue, ServiceStatus
from console.ssh import ConnState, HostState

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
    "unit",
    "budget",
    "topk",
    "graph",
    "nvls",
    "accept",
    "tok/s",
    "alerts",
)


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
    crashed: bool = False
    """A crash signature was seen and no later run has logged ready yet."""
    alerts: int = 0
    """Crash alerts for this host since the console started (the list is `A`)."""
    extra: dict[str, str] = field(default_factory=dict)


def _flag(value: FlagValue) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "on" if value else "off"
    return str(value)


class HostTable(DataTable[Text | str]):
    """Hosts in profile order; `1`–`9` in the app select them."""

    COMPONENT_CLASSES = {"host-table--crashed"}
    DEFAULT_CSS = """
    HostTable { height: auto; max-height: 12; }
    HostTable > .host-table--crashed { color: $error; text-style: bold; }
    HostTable.-crashed { border: round $error; }
    """

    def __init__(self, names: list[str], **kwargs: object) -> None:
        super().__init__(cursor_type="row", zebra_stripes=True, **kwargs)  # type: ignore[arg-type]
        self.rows_by_name = {n: HostRow(i + 1, n) for i, n in enumerate(names)}
        # DataTable's render caches (10,000 cells, 1000 rows, 1000 lines) are keyed by its
        # update count: with numbers changing four times a second they fill with renders
        # never drawn again, ~25 MB reached after minutes (bench/memory.py: RSS still rising
        # at 4 M lines). Bounded to a few screens' worth instead.
        rows = len(names) + 1
        self._cell_render_cache = LRUCache(4 * len(COLUMNS) * rows)
        self._row_render_cache = LRUCache(4 * rows)
        self._row_renderable_cache = LRUCache(4 * rows)
        self._line_cache = LRUCache(4 * rows)

    def on_mount(self) -> None:
        for column in COLUMNS:
            self.add_column(column, key=column)
        for row in self.rows_by_name.values():
            self.add_row(*self._cells(row), key=row.name)

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
        accept = f"{row.accept_len:.2f}" if row.accept_len is not None else "-"
        tps = f"{row.throughput:.0f}" if row.throughput is not None else "-"
        # What the server did beats what the flags asked for (graphs can silently fall back).
        graph = row.graph if row.graph is not None else flags.get("cuda_graph")
        cells: list[Text | str] = [
            str(row.index),
            row.name,
            conn,
            unit,
            _flag(flags.get("budget")),
            _flag(flags.get("topk")),
            _flag(graph),
            _flag(flags.get("nvls")),
            accept,
            tps,
            Text(str(row.alerts), style="bold red") if row.alerts else "-",
        ]
        if row.crashed:
            alarm = self.get_component_rich_style("host-table--crashed", partial=True)
            cells = [Text(c.plain if isinstance(c, Text) else c, style=alarm) for c in cells]
        return cells

    def refresh_host(self, name: str) -> None:
        row = self.rows_by_name[name]
        for column, value in zip(COLUMNS, self._cells(row), strict=True):
            # Widening a column lays out the whole screen: only when the value needs it.
            width = value.cell_len if isinstance(value, Text) else cell_len(value)
            wider = width > self.columns[ColumnKey(column)].content_width
            self.update_cell(name, column, value, update_width=wider)

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
    ) -> None:
        row = self.rows_by_name[name]
        row.accept_len = accept_len if accept_len is not None else row.accept_len
        row.throughput = throughput if throughput is not None else row.throughput
        row.graph = graph if graph is not None else row.graph
        self.refresh_host(name)

    def new_run(self, name: str) -> None:
        """The service restarted: the live numbers belong to the previous run."""
        row = self.rows_by_name[name]
        row.accept_len = row.throughput = row.graph = None
        self.refresh_host(name)

    def set_crashed(self, name: str, crashed: bool) -> None:
        row = self.rows_by_name[name]
        row.alerts += crashed
        row.crashed = crashed
        self.refresh_host(name)
        self.set_class(any(r.crashed for r in self.rows_by_name.values()), "-crashed")
