"""The fleet table over an inventory's groups: `g` groups with aggregates, `o`/`O` sort by any
column, `F` filters by name, state or group, and the cursor stays on its host throughout."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from console.app import SpecopsApp
from console.fleet.fleet import Fleet
from console.hosts.inventory import load_inventory_fleet
from console.sim.fleet import SimFleet
from tests.ui.support import simulated_fleet, until
from widgets.commands import palette_commands
from widgets.host_table import HostTable
from widgets.journal_view import JournalView, PromptInput

GROUPS = {
    "blackwell": ["b300", "gb200"],
    "hopper": ["h200"],
    "workstation": ["pro6000", "l40s"],
}
UNGROUPED = ["mi355"]


@pytest.fixture
async def sim(tmp_path: Path) -> AsyncIterator[SimFleet]:
    async with simulated_fleet(tmp_path, hosts=6, decode_interval_s=0.2) as fleet:
        yield fleet


def grouped_app(sim: SimFleet, tmp_path: Path) -> SpecopsApp:
    """The app over a saved `ansible-inventory --list` naming the simulated hosts; the
    simulator's own profiles are the per-host templates (HOST.toml)."""
    listing = {
        "_meta": {
            "hostvars": {
                name: {"ansible_host": "127.0.0.1", "ansible_port": host.port}
                for name, host in sim.hosts.items()
            }
        },
        "all": {"children": ["ungrouped", "gpu"]},
        "gpu": {"children": list(GROUPS)},
        **{group: {"hosts": hosts} for group, hosts in GROUPS.items()},
        "ungrouped": {"hosts": UNGROUPED},
    }
    inventory = tmp_path / "inventory.json"
    inventory.write_text(json.dumps(listing))
    profiles = load_inventory_fleet(inventory, sim.profiles_dir)
    return SpecopsApp(Fleet(profiles, history=0))


def body(table: HostTable) -> list[list[str]]:
    """The table's lines as words, header first (as drawn, scrolled or not)."""
    return [table.render_line(y).text.split() for y in range(table.size.height)]


def firsts(lines: list[list[str]]) -> list[str]:
    """Each body line's host, or `▾ GROUP` for a group's aggregate line."""
    return [w[1] if w[0].isdigit() else " ".join(w[:2]) for w in lines[1:]]


def all_up(table: HostTable) -> bool:
    return all(
        r.state is not None and r.state.state.value == "connected"
        for r in table.rows_by_name.values()
    )


async def test_groups_with_aggregates(sim: SimFleet, tmp_path: Path) -> None:
    app = grouped_app(sim, tmp_path)
    async with app.run_test(size=(160, 48)) as pilot:
        table = app.query_one(HostTable)
        await until(pilot, lambda: all_up(table))
        await until(pilot, lambda: all(r.accept_len for r in table.rows_by_name.values()))
        await pilot.press("g")
        await pilot.pause()
        lines = body(table)
        assert firsts(lines) == [
            "▾ blackwell",
            "b300",
            "gb200",
            "▾ hopper",
            "h200",
            "▾ workstation",
            "pro6000",
            "l40s",
            "▾ ungrouped",
        ]  # fmt: skip  (nine lines under the header; the last host is scrolled to)
        await pilot.press("6")
        await pilot.pause()
        assert firsts(body(table))[-2:] == ["▾ ungrouped", "mi355"]
        await pilot.press("1")
        await pilot.pause()
        group = body(table)[1]
        assert group[2:4] == ["2/2", "up"]
        rows = [table.rows_by_name[n] for n in GROUPS["blackwell"]]
        mean = sum(r.accept_len or 0 for r in rows) / 2
        total = sum(r.throughput or 0 for r in rows)
        assert f"{mean:.2f}" in group and f"{total:.0f}" in group  # read in one frame

        await sim.hosts["gb200"].go_offline()
        await until(pilot, lambda: body(table)[1][2:4] == ["1/2", "up"])
        table.set_crashed("b300", True)
        await pilot.pause()
        assert body(table)[1][-1] == "1"  # the group's unseen alerts
        await pilot.press("g")  # back to one list, in profile order
        await pilot.pause()
        assert [w[1] for w in body(table)[1:7]] == app.host_names  # the inventory's order


async def test_sort_by_any_column_keeps_the_cursor_on_its_host(
    sim: SimFleet, tmp_path: Path
) -> None:
    app = grouped_app(sim, tmp_path)
    async with app.run_test(size=(160, 48)) as pilot:
        table = app.query_one(HostTable)
        await until(pilot, lambda: all_up(table))
        third = app.host_names[2]
        await pilot.press("3")  # the third host in the `#` column
        await pilot.press("o")  # by host name
        await pilot.pause()
        assert body(table)[0][1:3] == ["host", "▲"]
        assert table.names == sorted(sim.hosts)
        assert table.cursor_host == third == app.selected_host
        assert app.query_one(JournalView).host == third
        await pilot.press("O")
        await pilot.pause()
        assert table.names == sorted(sim.hosts, reverse=True)
        assert body(table)[0][1:3] == ["host", "▼"]

        for _ in range(20):  # every column comes round, then profile order again
            await pilot.press("o")
            if table.sort_column == "tok/s":
                break
        assert table.sort_column == "tok/s"
        await until(pilot, lambda: all(r.throughput for r in table.rows_by_name.values()))
        await pilot.press("O")  # the busiest first
        table.rearrange()  # what the app's 1 s timer does; read in the same step
        rates = [table.rows_by_name[n].throughput or 0 for n in table.names]
        assert rates == sorted(rates, reverse=True)
        assert table.cursor_host == third
        while table.sort_column != "#":
            await pilot.press("o")
        await pilot.press("O")
        await pilot.press("O")
        await pilot.pause()
        assert table.names == app.host_names


async def test_filter_by_name_state_and_group(sim: SimFleet, tmp_path: Path) -> None:
    app = grouped_app(sim, tmp_path)
    notes: list[str] = []
    async with app.run_test(size=(160, 48)) as pilot:
        app.notify = lambda message, **kw: notes.append(str(message))  # type: ignore[method-assign]
        table = app.query_one(HostTable)
        prompt = app.query_one("#fleet-filter", PromptInput)
        await until(pilot, lambda: all_up(table))

        async def apply(text: str) -> None:
            await pilot.press("F")
            prompt.value = ""
            await pilot.press(*text, "enter")
            await pilot.pause()

        await apply("group=workstation")
        assert table.names == [n for n in app.host_names if n in GROUPS["workstation"]]
        assert body(table)[0][1:3] == ["host", "2/6"]
        assert app.selected_host == table.names[0]  # the cursor's host was hidden: the first shown
        await apply("b")
        assert table.names == [n for n in app.host_names if "b" in n]
        await apply("group=gpu name!~b")
        assert table.names == [n for n in app.host_names if n in ("pro6000", "h200", "l40s")]

        await apply("state=down")
        assert table.names == [] and "no host matches 'state=down'" in notes[-1]
        await sim.hosts["h200"].go_offline()
        await until(pilot, lambda: table.names == ["h200"])  # the filter follows the hosts

        await apply("grop=b300")
        assert "unknown field 'grop'" in notes[-1]
        assert prompt.has_class("-open") and table.names == ["h200"]  # nothing changed
        await pilot.press("escape")
        await pilot.press("1")
        assert f"{app.host_names[0]} is hidden by the host filter" in notes[-1]
        await apply(" ")
        assert table.names == app.host_names
        assert body(table)[0][1] == "host" and body(table)[0][2] == "connection"


def test_the_palette_names_every_fleet_table_action() -> None:
    commands = {c.title: c.action for c in palette_commands(SpecopsApp.BINDINGS, [])}  # type: ignore[arg-type]
    assert commands["hosts: group by inventory group / one list"] == "group_hosts"
    assert commands["hosts: sort by the next column"] == "sort_hosts"
    assert commands["hosts: reverse the sort"] == "reverse_hosts"
    assert commands["hosts: filter by name, state or group"] == "filter_hosts"
