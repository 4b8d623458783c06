"""The flag editor and the live rollout view, driven by keys against a simulated host."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from textual import events
from textual.message import Message
from textual.notifications import Notify
from textual.pilot import Pilot
from textual.widgets import DataTable, Input, Log, Static
from textual.widgets._footer import FooterKey
from textual.widgets.data_table import ColumnKey

from console.app import SpecopsApp
from console.cli.tui import build_app
from console.fleet.fleet import Fleet
from console.hosts.events import RolloutOutcome
from console.hosts.profiles import load_fleet
from console.ledger.ledger import host_dir
from console.ledger.ledger import load as load_experiments
from console.sim.fleet import SimFleet
from console.transport.host_files import STATE_ROOT
from tests.ui.support import simulated_fleet, until
from widgets.flag_editor import FlagEditorScreen
from widgets.host_table import HostTable
from widgets.rollout_view import RolloutScreen

plan_unit = "sglang-k26-ddtree.service"
CHANGING = ("tee ", "mv ", "rm ", "mkdir ", "systemctl daemon-reload", "systemctl restart")


@pytest.fixture
async def fleet(tmp_path: Path) -> AsyncIterator[SimFleet]:
    async with simulated_fleet(tmp_path, hosts=1, decode_interval_s=0.5) as sim:
        yield sim


def text_of(static: Static) -> str:
    return str(static.render())


async def open_editor(app: SpecopsApp, pilot: Pilot[int]) -> FlagEditorScreen:
    await until(pilot, lambda: "budget" in getattr(app.fleet.status.get("b300"), "flags", {}))
    await pilot.press("f")
    await until(pilot, lambda: isinstance(app.screen, FlagEditorScreen))
    assert isinstance(app.screen, FlagEditorScreen)
    return app.screen


async def test_edit_a_value_review_the_diff_and_cancel(fleet: SimFleet) -> None:
    app = SpecopsApp(Fleet(load_fleet(fleet.profiles_dir)))
    async with app.run_test(size=(140, 44)) as pilot:
        editor = await open_editor(app, pilot)
        table = editor.query_one(DataTable)
        assert table.get_cell("budget", "current") == "8"
        assert table.get_cell("cuda_graph", "current") == "on"
        await pilot.press("enter")  # the budget row
        assert editor.query_one(Input).has_focus
        await pilot.press("backspace", "minus", "1", "enter")
        assert "must be between 1 and 1024" in text_of(editor.query_one("#flag-error", Static))
        await pilot.press("backspace", "backspace", "1", "6", "enter")
        assert table.get_cell("budget", "new") == "16"
        assert editor.pending == {"budget": 16}
        await pilot.press("d")
        await until(pilot, lambda: editor.plan is not None)
        diff = text_of(editor.query_one("#flag-diff-text", Static))
        assert "-    --speculative-num-draft-tokens 8" in diff
        assert "+    --speculative-num-draft-tokens 16" in diff
        assert "budget 8 → 16" in text_of(editor.query_one("#flag-hint", Static))
        await pilot.press("escape")  # back to the values
        assert editor.plan is None and editor.pending == {"budget": 16}
        await pilot.press("escape")  # close without applying
        await until(pilot, lambda: not isinstance(app.screen, FlagEditorScreen))
        await pilot.pause(0.2)
        sent = fleet.hosts["b300"].commands
        assert any(c.startswith("systemctl cat") for c in sent)
        assert any("launch_server --help" in c for c in sent)
        assert not any(c.startswith(CHANGING) for c in sent)
        await pilot.press("q")


async def test_a_confirmed_change_ends_healthy_with_live_progress(fleet: SimFleet) -> None:
    messages: list[Message] = []
    app = SpecopsApp(Fleet(load_fleet(fleet.profiles_dir)))
    async with app.run_test(size=(140, 44), message_hook=messages.append) as pilot:
        editor = await open_editor(app, pilot)
        await pilot.press("enter", "backspace", "1", "6", "enter")
        await pilot.press("down", "down", "space")  # cuda_graph: on → off
        assert editor.pending == {"budget": 16, "cuda_graph": False}
        await pilot.press("d")
        await until(pilot, lambda: editor.plan is not None)
        await pilot.press("y")
        await until(pilot, lambda: isinstance(app.screen, RolloutScreen))
        screen = app.screen
        assert isinstance(screen, RolloutScreen)
        view = screen  # narrowed for the lambdas below
        await pilot.press("q")  # mid-rollout: asks first instead of stopping it half way
        assert app.is_running and app.screen is view
        assert any(
            isinstance(m, Notify) and "press q again" in m.notification.message for m in messages
        )
        assert "Close (the rollout goes on)" in [k.description for k in view.query(FooterKey)]
        steps = view.query_one("#rollout-table", DataTable)

        def soak_countdown() -> str:
            return str(steps.get_cell("soak", "detail")) if "soak" in steps.rows else ""

        # The soak (5 s on this fleet) counts down with the live accept length.
        await until(pilot, lambda: "s left · accept len " in soak_countdown())
        assert str(steps.get_cell("soak", "state")) == "waiting"
        await until(pilot, lambda: view.result is not None)
        assert view.result is not None and view.result.outcome is RolloutOutcome.APPLIED
        assert [
            str(steps.get_cell(k, "state")) for k in ("record", "smoke test", "soak", "history")
        ] == ["ok", "ok", "ok", "ok"]
        journal = view.query_one(Log)
        assert any("ready to roll" in line for line in journal.lines)
        assert any("cuda graph: False" in line for line in journal.lines)
        outcome = text_of(view.query_one("#rollout-outcome", Static))
        assert "applied; healthy" in outcome and "stayed up 5s" in outcome
        await pilot.pause()  # the footer follows the bindings: the rollout no longer goes on
        footer = [k.description for k in view.query(FooterKey)]
        assert "Close" in footer and "Close (the rollout goes on)" not in footer

        def applied_notice() -> bool:
            notes = [m.notification for m in messages if isinstance(m, Notify)]
            return any(n.severity == "information" and "b300: applied" in n.message for n in notes)

        await until(pilot, applied_notice)
        await pilot.press("escape")
        row = app.query_one(HostTable).rows_by_name["b300"]
        await until(pilot, lambda: row.status is not None and row.status.flags.get("budget") == 16)
        assert row.status is not None and row.status.flags["cuda_graph"] is False
        await until(pilot, lambda: bool(load_experiments("b300")))  # the ledger has the change
        ((_, experiment),) = load_experiments("b300")
        assert (experiment.outcome, experiment.source) == ("kept", "tui")
        assert experiment.before.flags["budget"] == 8 and experiment.after.flags["budget"] == 16
        assert experiment.after.invocation == row.status.invocation_id
        ledger = fleet.hosts["b300"].local(host_dir(plan_unit, STATE_ROOT))
        assert [p.name for p in ledger.glob("*.json")] == [experiment.file_name()]  # on the host
        await pilot.press("q")


@pytest.mark.parametrize("source", ["flag", "settings", "environment"])
async def test_read_only_disables_the_flag_editor(
    fleet: SimFleet, source: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """From every source, as `specops` builds the app (issue 20, item 4)."""
    if source == "settings":
        settings = tmp_path / "settings.toml"
        settings.write_text("read_only = true\n")
        monkeypatch.setenv("SPECOPS_SETTINGS", str(settings))
    elif source == "environment":
        monkeypatch.setenv("SPECOPS_READ_ONLY", "1")
    messages: list[Message] = []
    app = build_app(load_fleet(fleet.profiles_dir), read_only=source == "flag")
    async with app.run_test(size=(140, 44), message_hook=messages.append) as pilot:
        await pilot.press("f")
        await pilot.pause(0.1)
        assert not isinstance(app.screen, FlagEditorScreen)
        notes = [m.notification for m in messages if isinstance(m, Notify)]
        assert any("read-only" in n.message for n in notes)
        await pilot.press("q")


async def test_keys_typed_in_one_burst_all_reach_the_value_and_the_column_fits_it(
    fleet: SimFleet,
) -> None:
    app = SpecopsApp(Fleet(load_fleet(fleet.profiles_dir)))
    async with app.run_test(size=(80, 24)) as pilot:
        editor = await open_editor(app, pilot)
        # As tmux delivers `Down Down Down Down Enter 2 0 4 8 Enter d` from one send-keys: no
        # pause between keys (the downs reach max_running before enter opens it, the d after
        # enter reaches the table, not the field). The field opens with the current value
        # selected: typing replaces it.
        for key, char in (
            *[("down", None)] * 4,
            ("enter", "\r"),
            ("2", "2"),
            ("0", "0"),
            ("4", "4"),
            ("8", "8"),
            ("enter", "\r"),
            ("d", "d"),
        ):
            app.post_message(events.Key(key, char))
        await until(pilot, lambda: editor.pending.get("max_running") == 2048)
        await until(pilot, lambda: editor.plan is not None)  # the d: its diff, reviewed
        table = editor.query_one(DataTable)
        assert table.get_cell("max_running", "new") == "2048"
        new = table.columns[ColumnKey("new")]
        # The column is measured again when the table next updates (a frame later when slow).
        await until(pilot, lambda: new.get_render_width(table) >= len("2048") + 2)
        shown = app.export_screenshot()
        assert "2048" in shown
        diff = text_of(editor.query_one("#flag-diff-text", Static))
        assert "+    --max-running-requests 2048" in diff
        # At 80×24 the diff and its `y` hint fit on screen (the values make room).
        hint = editor.query_one("#flag-hint", Static)
        assert "y apply and restart" in text_of(hint) and 0 < hint.region.bottom <= 24
        await pilot.press("escape", "escape", "q")


async def test_the_editor_shows_last_good_and_crashed_here_before_per_flag(
    fleet: SimFleet,
) -> None:
    app = SpecopsApp(Fleet(load_fleet(fleet.profiles_dir)))
    async with app.run_test(size=(140, 44)) as pilot:
        editor = await open_editor(app, pilot)
        await pilot.press("enter", *"16", "enter", "d")  # budget 16 with CUDA graphs: crashes
        await until(pilot, lambda: editor.plan is not None)
        await pilot.press("y")
        await until(pilot, lambda: isinstance(app.screen, RolloutScreen))
        view = app.screen
        assert isinstance(view, RolloutScreen)
        await until(pilot, lambda: view.result is not None, timeout=30)
        assert view.result is not None and view.result.outcome is RolloutOutcome.ROLLED_BACK
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, RolloutScreen))
        again = await open_editor(app, pilot)

        def budget_history() -> str:
            return str(again.query_one(DataTable).get_cell("budget", "history"))

        # The host's history: its last good configuration is the unit's original (budget 8).
        await until(pilot, lambda: budget_history() == "good 8 · crashed 16")
        assert str(again.query_one(DataTable).get_cell("cuda_graph", "history")) == "good on"
        await pilot.press("escape", "q")
