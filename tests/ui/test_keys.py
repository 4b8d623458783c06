"""Every operator key on the simulated fleet: help, palette, hosts, copy, save, audit, stats,
remapped keys, and an app that survives dead hosts, junk lines and failing jobs."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from textual.command import CommandPalette

from console.app import SpecopsApp
from console.fleet.fleet import Fleet
from console.hosts.profiles import load_fleet
from console.local.audit import AuditLog
from console.local.settings import Settings, state_dir
from console.sim.fleet import SimFleet
from tests.ui.support import simulated_fleet, until
from widgets.audit_view import AuditScreen
from widgets.help_screen import HelpScreen
from widgets.host_table import HostTable
from widgets.journal_view import JournalView
from widgets.snapshot_panel import SnapshotPanel
from widgets.stats_panel import StatsPanel

UNIT = "sglang-k26-ddtree.service"


@pytest.fixture
async def sim(tmp_path: Path) -> AsyncIterator[SimFleet]:
    async with simulated_fleet(tmp_path, hosts=3, decode_interval_s=0.5) as fleet:
        yield fleet


def live_app(sim: SimFleet, **kwargs: object) -> SpecopsApp:
    fleet = Fleet(load_fleet(sim.profiles_dir), on_command=AuditLog().record)
    return SpecopsApp(fleet, **kwargs)  # type: ignore[arg-type]


async def test_help_palette_hosts_copy_save_audit_and_stats(sim: SimFleet) -> None:
    app = live_app(sim)
    async with app.run_test(size=(160, 48)) as pilot:
        view = app.query_one(JournalView)
        await until(pilot, lambda: any("accept len" in line for line in view.lines))

        await pilot.press("question_mark")
        await until(pilot, lambda: isinstance(app.screen, HelpScreen))
        listed = {row[2] for row in app.screen._rows}  # type: ignore[attr-defined]
        for needed in (
            "flags-edit",
            "snapshot-host",
            "merged-journal",
            "help",
            "yank-view",
            "audit-log",
            "alerts-list",
            "pause-tail",
            "search-journal",
        ):
            assert needed in listed
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, HelpScreen))

        # Hosts by number and by tab; the journal follows the selection.
        await pilot.press("2")
        await until(pilot, lambda: view.host == app.host_names[1])
        await pilot.press("tab")
        await until(pilot, lambda: view.host == app.host_names[2])
        await pilot.press("1")
        await until(pilot, lambda: view.host == app.host_names[0])

        # The palette runs namespaced commands: select a host through it.
        await pilot.press("ctrl+p")
        await until(pilot, lambda: isinstance(app.screen, CommandPalette))
        await pilot.press(*"host: select pro6000")
        await pilot.pause(0.5)
        await pilot.press("enter")
        await until(pilot, lambda: view.host == "pro6000")

        # Copy (OSC 52 goes to the terminal; the app keeps what it sent) and save.
        await until(pilot, lambda: len(view.lines) >= 2)
        await pilot.press("y")
        await until(pilot, lambda: bool(app.clipboard))
        copied = app.clipboard.split("\n")  # lines keep arriving: check what was on screen
        assert "accept len" in app.clipboard
        assert 1 < len(copied) <= view.scrollable_content_region.height
        assert all(line in view.lines for line in copied)
        await pilot.press("Y")
        await until(pilot, lambda: app.clipboard == view.lines[-1] or "\n" not in app.clipboard)
        await pilot.press("w")
        saved_dir = state_dir() / "saved"
        await until(pilot, lambda: saved_dir.is_dir() and any(saved_dir.glob("pro6000-*.log")))
        saved = next(saved_dir.glob("pro6000-*.log")).read_text()
        assert "accept len" in saved

        # The audit log of what the console ran on the hosts.
        await pilot.press("L")
        await until(pilot, lambda: isinstance(app.screen, AuditScreen))
        records = app.screen.records  # type: ignore[attr-defined]
        commands = [r.command for r in records]
        assert any("journalctl" in c for c in commands)
        assert not any(c.startswith("systemctl show") for c in commands)  # polls left out
        assert {r.host for r in records} >= set(app.host_names)
        await pilot.press("escape")

        # Stats panel folds away and back.
        stats = app.query_one(StatsPanel)
        shown = stats.display
        await pilot.press("t")
        await until(pilot, lambda: stats.display is not shown)
        await pilot.press("t")
        await until(pilot, lambda: stats.display is shown)

        before = {name: host.unit.invocation_id for name, host in sim.hosts.items()}
        await pilot.press("q")
    # Quitting leaves every host as it was: same runs, no changing command sent.
    assert {name: host.unit.invocation_id for name, host in sim.hosts.items()} == before
    for host in sim.hosts.values():
        assert not any(c.split()[:2] == ["systemctl", "restart"] for c in host.commands)


async def test_remapped_key_from_settings(sim: SimFleet) -> None:
    app = live_app(sim, settings=Settings(keymap={"snapshot-host": "ctrl+t", "help": "f1"}))
    async with app.run_test(size=(140, 40)) as pilot:
        await until(pilot, lambda: app.fleet.status.get(app.host_names[0]) is not None)
        await pilot.press("f1")
        await until(pilot, lambda: isinstance(app.screen, HelpScreen))
        await pilot.press("escape")
        await pilot.press("ctrl+t")
        panel = app.query_one(SnapshotPanel)
        await until(pilot, lambda: panel.display, timeout=10)


async def test_dead_hosts_junk_lines_and_failing_jobs_never_close_the_app(
    sim: SimFleet,
) -> None:
    dead = sim.hosts["h200"]
    await dead.go_offline()
    app = live_app(sim)
    async with app.run_test(size=(140, 40)) as pilot:
        table = app.query_one(HostTable)
        view = app.query_one(JournalView)
        await until(pilot, lambda: any("accept len" in line for line in view.lines))
        await until(
            pilot,
            lambda: (
                table.rows_by_name["h200"].state is not None
                and table.rows_by_name["h200"].state.state.value == "unreachable"
            ),
        )
        # Junk on the wire: control bytes, invalid UTF-8 stand-ins, a 1 MB line.
        journal = sim.hosts["b300"].journal
        journal.append(UNIT, "\x1b[31m\x00\x07 junk \udcff")
        journal.append(UNIT, "accept len " + "x" * 1_000_000)
        journal.append(UNIT, "[2026-12-02 10:00:00 TP0] Decode batch, accept len: nan, oops")
        await until(pilot, lambda: any("oops" in line for line in view.lines))
        assert all(len(line) < 5000 for line in view.lines)

        async def broken() -> None:
            raise RuntimeError("disk on fire")

        app.run_worker(broken(), exit_on_error=False, description="test job")
        await until(
            pilot,
            lambda: any("disk on fire" in str(n.message) for n in app._notifications),
        )
        await pilot.press("2")  # still responsive
        await until(pilot, lambda: view.host == app.host_names[1])
        assert app.is_running


async def test_a_key_holds_the_engine_until_its_repaint(sim: SimFleet) -> None:
    """Input first: while a key waits for its repaint the engine's thread sleeps (the lines
    wait on the host) and the journal view takes no new lines; then both go on."""
    app = live_app(sim)
    # The hold's limit (0.1 s) bounds a slow repaint; here it must be the repaint that ends
    # the hold, however long a starved core takes to paint.
    app.input_priority_s = 60.0
    async with app.run_test(size=(160, 48)) as pilot:
        view = app.query_one(JournalView)
        await until(pilot, lambda: any("accept len" in line for line in view.lines))
        engine_ran: list[bool] = []
        at_repaint: list[int] = []
        original_select, original_answered = app.action_select_index, app._input_answered

        def select(index: int) -> None:
            app.engine.call(lambda: engine_ran.append(True))
            original_select(index)

        def answered(key: object) -> None:
            at_repaint.append(len(engine_ran))
            original_answered(key)

        app.action_select_index = select  # type: ignore[method-assign]
        app._input_answered = answered  # type: ignore[method-assign]
        await pilot.press("2")
        await until(pilot, lambda: engine_ran != [])
        assert at_repaint[-1] == 0  # nothing ran on the engine before the repaint
        assert view.host == app.host_names[1]
        shown = view.line_count
        await until(pilot, lambda: view.line_count > shown)  # the tail goes on
