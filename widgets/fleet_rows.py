"""What the fleet table knows of each host, and the order it shows them in.

One `HostRow` per host; `arrange` turns the rows into the table's lines for a filter, a sort
column and grouping: host lines, under a `GroupLine` per inventory group when grouped, whose
`GroupSummary` is the group's aggregate (hosts up, mean accept length, total tok/s, alerts).
No Textual here: the widget (widgets/host_table.py) draws what this module decides.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from console.fleet.filter import FleetFilter, HostFacts
from console.hosts.events import ServiceStatus
from console.hosts.profiles import FlagValue
from console.transport.ssh import ConnState, HostState
from console.watch.gpus import GpuState, fullest

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
    "gpu",
    "age",
    "restarts",
    "alerts",
    "sglang",
)
NO_GROUP = ""
"""The group line of hosts that are in no group (drawn as `ungrouped`, listed last)."""
STATE_WORD = {ConnState.HOST_KEY_REFUSED: "refused"}
"""A connection state's word in the filter (the others are their own value)."""

CONNECTION_RANK = {
    state: rank
    for rank, state in enumerate(
        (
            ConnState.HOST_KEY_REFUSED,
            ConnState.UNREACHABLE,
            ConnState.RECONNECTING,
            ConnState.CONNECTING,
            ConnState.CLOSED,
            ConnState.IDLE,
            ConnState.CONNECTED,
        )
    )
}
"""Sorted by `connection`, the hosts in trouble come first."""


@dataclass
class HostRow:
    index: int
    name: str
    groups: tuple[str, ...] = ()
    """The host's fleet groups, shallowest first (an inventory's, or a profile's `groups`)."""
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
    campaign: str | None = None
    """A tuning campaign owns the host (`specops sweep`): its id and cells done, or None."""
    marked: bool = False
    """Marked by the operator (`space`): the flag editor changes the marked hosts together."""
    gpus: tuple[GpuState, ...] = ()
    """The host's GPUs at the newest reading (none: not read yet, or no GPU tool)."""
    extra: dict[str, str] = field(default_factory=dict)

    @property
    def group(self) -> str:
        """The group the host is listed under when grouped: its most specific (deepest)."""
        return self.groups[-1] if self.groups else NO_GROUP

    @property
    def connected(self) -> bool:
        return self.state is not None and self.state.state is ConnState.CONNECTED

    @property
    def idle(self) -> bool:
        """Closed on purpose (on-demand mode): neither up nor down."""
        return self.state is not None and self.state.state is ConnState.IDLE

    @property
    def unseen(self) -> int:
        return self.alerts - self.seen

    def facts(self) -> HostFacts:
        """The words a filter matches (console/fleet/filter.py's STATES)."""
        conn = self.state.state if self.state is not None else ConnState.CONNECTING
        words = {STATE_WORD.get(conn, conn.value)}
        if not self.idle:  # an idle host is not known to be up, and is in no trouble
            words.add("up" if self.connected else "down")
        if self.status is not None:
            words.add("error" if self.status.error else self.status.active_state)
        for word, on in (
            ("crashed", self.crashed),
            ("crash-loop", self.looping),
            ("alerting", self.unseen > 0),
            ("stale", self.stale),
        ):
            if on:
                words.add(word)
        return HostFacts(self.name, frozenset(words), self.groups)


def _flag_key(value: FlagValue) -> tuple[int, float | str] | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return (0, float(value))
    if isinstance(value, int | float):
        return (0, float(value))
    return (1, str(value))


def sort_value(row: HostRow, column: str) -> object:
    """The row's value in `column` for sorting; None (no value) sorts last either way."""
    status = row.status
    flags = status.flags if status is not None else {}
    if column == "#":
        return row.index
    if column == "host":
        return row.name
    if column == "connection":
        return CONNECTION_RANK[row.state.state if row.state is not None else ConnState.CONNECTING]
    if column == "health":
        return row.health
    if column == "unit":
        if status is None:
            return None
        if row.looping:
            return "crash-loop"
        return "error" if status.error else status.active_state
    if column in ("budget", "topk", "nvls"):
        return _flag_key(flags.get(column))
    if column == "graph":
        return _flag_key(row.graph if row.graph is not None else flags.get("cuda_graph"))
    if column == "accept":
        return row.accept_len
    if column == "tok/s":
        return row.throughput
    if column == "gpu":
        top = fullest(row.gpus)  # the fullest memory first: what runs out first
        return None if top is None else (top.memory_used_mib or 0) / (top.memory_total_mib or 1)
    if column == "age":
        return row.age_s
    if column == "restarts":
        return row.restarts
    if column == "alerts":
        return (row.unseen, row.alerts)
    if column == "sglang":
        return _version_key(status.sglang_version) if status is not None else None
    raise ValueError(f"no column {column!r}")


def _version_key(version: str | None) -> tuple[tuple[int, int | str], ...] | None:
    if not version:
        return None
    parts = version.replace("-", ".").split(".")
    return tuple((0, int(p)) if p.isdigit() else (1, p) for p in parts)


@dataclass(frozen=True)
class GroupLine:
    group: str


@dataclass(frozen=True)
class GroupSummary:
    """A group's aggregate over the hosts it lists (the filter's, when one is set)."""

    hosts: int
    up: int
    accept_len: float | None
    """Mean of the hosts' newest accept lengths (hosts without one are left out)."""
    throughput: float | None
    """Sum of the hosts' newest tok/s."""
    restarts: int
    alerts: int
    unseen: int
    idle: int = 0
    """Hosts closed on demand: not counted as up, and no reason for alarm."""


def summarise(rows: Iterable[HostRow]) -> GroupSummary:
    rows = list(rows)
    accepts = [r.accept_len for r in rows if r.accept_len is not None and not r.stale]
    rates = [r.throughput for r in rows if r.throughput is not None and not r.stale]
    return GroupSummary(
        hosts=len(rows),
        up=sum(r.connected for r in rows),
        accept_len=sum(accepts) / len(accepts) if accepts else None,
        throughput=sum(rates) if rates else None,
        restarts=sum(r.restarts for r in rows),
        alerts=sum(r.alerts for r in rows),
        unseen=sum(max(0, r.unseen) for r in rows),
        idle=sum(r.idle for r in rows),
    )


Line = str | GroupLine
"""A line of the table's body: a host's name, or a group's aggregate."""


@dataclass(frozen=True)
class Arrangement:
    hosts: list[str]
    """The hosts shown, in the order shown: what the cursor moves over."""
    lines: list[Line]
    members: dict[str, list[str]]
    """Each shown group's hosts (when grouped)."""


def arrange(
    rows: Mapping[str, HostRow],
    query: FleetFilter,
    sort: str,
    reverse: bool,
    grouped: bool,
) -> Arrangement:
    """The table's lines: `rows` (in profile order) filtered, sorted by `sort`, grouped."""
    kept = [r for r in rows.values() if query.empty or query.matches(r.facts())]
    if sort != "#":
        valued = [(sort_value(r, sort), r) for r in kept]
        present = [(v, r) for v, r in valued if v is not None]
        present.sort(key=lambda vr: vr[0], reverse=reverse)  # type: ignore[arg-type,return-value]
        kept = [r for _, r in present] + [r for v, r in valued if v is None]
    elif reverse:
        kept.reverse()
    if not grouped:
        names = [r.name for r in kept]
        return Arrangement(names, list(names), {})
    members: dict[str, list[str]] = {}
    for row in kept:
        members.setdefault(row.group, []).append(row.name)
    order = sorted(members, key=lambda g: (g == NO_GROUP, g))
    hosts: list[str] = []
    lines: list[Line] = []
    for group in order:
        lines.append(GroupLine(group))
        lines.extend(members[group])
        hosts.extend(members[group])
    return Arrangement(hosts, lines, members)
