"""The fleet table's order and aggregates, without a screen: sort with missing values last,
groups by the deepest group, and what a group's line adds up."""

from __future__ import annotations

from console.fleet.filter import NO_FILTER, parse_filter
from console.transport.ssh import ConnState, HostState
from widgets.fleet_rows import GroupLine, HostRow, arrange, summarise


def rows() -> dict[str, HostRow]:
    up = HostState("x", ConnState.CONNECTED)
    table = {
        "a": HostRow(1, "a", ("gpu", "b300"), state=up, accept_len=4.0, throughput=1000.0),
        "b": HostRow(2, "b", ("gpu", "pro"), state=up, accept_len=3.0, throughput=500.0),
        "c": HostRow(3, "c", ("gpu", "b300"), accept_len=5.0, throughput=2000.0, stale=True),
        "d": HostRow(4, "d", (), state=up),
    }
    return table


def test_sorting_puts_hosts_without_a_value_last_both_ways() -> None:
    table = rows()
    assert arrange(table, NO_FILTER, "tok/s", False, False).hosts == ["b", "a", "c", "d"]
    assert arrange(table, NO_FILTER, "tok/s", True, False).hosts == ["c", "a", "b", "d"]
    assert arrange(table, NO_FILTER, "#", True, False).hosts == ["d", "c", "b", "a"]
    table["d"].state = HostState("d", ConnState.UNREACHABLE)
    by_connection = arrange(table, NO_FILTER, "connection", False, False).hosts
    assert by_connection == ["d", "c", "a", "b"]  # trouble first: unreachable, connecting


def test_groups_by_the_deepest_group_with_ungrouped_last() -> None:
    layout = arrange(rows(), NO_FILTER, "#", False, True)
    assert layout.lines == [
        GroupLine("b300"), "a", "c", GroupLine("pro"), "b", GroupLine(""), "d",
    ]  # fmt: skip
    assert layout.hosts == ["a", "c", "b", "d"]
    only = arrange(rows(), parse_filter("state=up", ["gpu"]), "#", False, True)
    assert only.members == {"b300": ["a"], "pro": ["b"], "": ["d"]}


def test_a_group_adds_up_its_live_hosts() -> None:
    table = rows()
    table["a"].alerts, table["c"].alerts, table["c"].seen = 2, 1, 1
    table["a"].restarts = 3
    summary = summarise([table["a"], table["c"]])
    assert (summary.hosts, summary.up) == (2, 1)
    assert summary.accept_len == 4.0 and summary.throughput == 1000.0  # c is stale: left out
    assert (summary.restarts, summary.alerts, summary.unseen) == (3, 3, 2)
    assert summarise([table["d"]]).accept_len is None


def test_an_idle_host_is_neither_up_nor_down_and_counted_apart() -> None:
    table = rows()
    table["b"].state = HostState("b", ConnState.IDLE)
    assert parse_filter("state=idle").matches(table["b"].facts())
    assert not parse_filter("state=down").matches(table["b"].facts())
    assert not parse_filter("state=up").matches(table["b"].facts())
    assert parse_filter("state=down").matches(table["c"].facts())  # connecting: down
    summary = summarise(table.values())
    assert (summary.hosts, summary.up, summary.idle) == (4, 2, 1)
    by_connection = arrange(table, NO_FILTER, "connection", False, False).hosts
    assert by_connection == ["c", "b", "a", "d"]  # connecting, then idle, then connected
