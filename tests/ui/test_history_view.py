"""The history view (`h`) and rollbacks from the TUI (`R`; `enter` / `o` in the view), driven
by keys against a simulated host. Each check is what an operator would look at: the rows on
screen, the host's drop-in and `specops flags HOST --json` afterwards."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from textual import events
from textual.message import Message
from textual.notifications import Notify
from textual.pilot import Pilot
from textual.widgets import DataTable, Static

from console.app import SpecopsApp
from console.cli import flags as cli_flags
from console.cli import parse_args
from console.cli import set as cli_set
from console.fleet.fleet import Fleet
from console.hosts.events import RolloutOutcome
from console.hosts.profiles import load_fleet
from console.sim.fleet import SimFleet
from console.tuning.history_rows import HostHistory
from tests.ui.scripted import ScriptedFleet, profiles, scripted_history
from tests.ui.support import applied, simulated_fleet, until
from widgets.history_view import HistoryScreen
from widgets.rollback_confirm import RollbackConfirmScreen
from widgets.rollout_view import RolloutScreen

UNIT = "sglang-k26-ddtree.service"
DROPIN = f"/etc/systemd/system/{UNIT}.d/zz-specops.conf"
CHANGING = ("tee ", "mv ", "rm ", "mkdir ", "systemctl daemon-reload", "systemctl restart")


@pytest.fixture
async def fleet(tmp_path: Path) -> AsyncIterator[SimFleet]:
    # 0.1 s between decode lines: the profiles' soak is 1 s, so each change takes seconds.
    async with simulated_fleet(tmp_path, hosts=1, decode_interval_s=0.1) as sim:
        yield sim


async def specops_set(sim: SimFleet, *assignments: str) -> int:
    """`specops set b300 … --yes`, as an operator would have run it before opening the TUI."""
    args = parse_args(["set", "b300", *assignments, "--yes"])
    args.profiles = str(sim.profiles_dir)
    return await cli_set.cmd_set(args)


async def specops_flags(sim: SimFleet, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    """`specops flags b300 --json`, with each flag's record reduced to its value."""
    args = parse_args(["flags", "b300", "--json"])
    args.profiles = str(sim.profiles_dir)
    capsys.readouterr()
    assert await cli_flags.cmd_flags(args) == 0
    record: dict[str, Any] = json.loads(capsys.readouterr().out)
    record["flags"] = {name: flag["value"] for name, flag in record["flags"].items()}
    return record


def text_of(static: Static) -> str:
    return str(static.render())


def rows(table: DataTable[Any]) -> list[list[str]]:
    return [[str(cell) for cell in table.get_row_at(i)] for i in range(table.row_count)]


async def open_history(app: SpecopsApp, pilot: Pilot[int]) -> HistoryScreen:
    await until(pilot, lambda: "budget" in getattr(app.fleet.status.get("b300"), "flags", {}))
    await pilot.press("h")
    await until(pilot, lambda: isinstance(app.screen, HistoryScreen))
    screen = app.screen
    assert isinstance(screen, HistoryScreen)
    await until(pilot, lambda: screen.history is not None or screen.error is not None)
    return screen


async def open_confirm(app: SpecopsApp, pilot: Pilot[int], *keys: str) -> RollbackConfirmScreen:
    """Press `keys` and wait for the rollback's diff to be worked out."""
    await pilot.press(*keys)
    await until(pilot, lambda: isinstance(app.screen, RollbackConfirmScreen))
    confirm = app.screen
    assert isinstance(confirm, RollbackConfirmScreen)
    await until(pilot, lambda: confirm.plan is not None)
    return confirm


def target_of(confirm: RollbackConfirmScreen) -> str:
    return text_of(confirm.query_one("#rollback-target", Static))


async def confirm_and_run(app: SpecopsApp, pilot: Pilot[int]) -> RolloutScreen:
    """`y` on the rollback's diff; returns the rollout's screen once the rollout ended."""
    assert isinstance(app.screen, RollbackConfirmScreen) and app.screen.plan is not None
    return await applied(pilot)


async def test_the_history_view_lists_each_change_newest_first_with_its_outcome(
    fleet: SimFleet,
) -> None:
    assert await specops_set(fleet, "budget=4") == 0
    assert await specops_set(fleet, "budget=16") == 1  # CUDA graphs on: dies in capture
    app = SpecopsApp(Fleet(load_fleet(fleet.profiles_dir)))
    async with app.run_test(size=(160, 40)) as pilot:
        screen = await open_history(app, pilot)
        table = screen.query_one(DataTable)
        shown = rows(table)
        assert [r[0] for r in shown] == ["2", "1", "0"]
        crashed, kept, original = shown
        assert crashed[3] == "budget=16"
        assert crashed[2] == "rolled back: illegal_memory_access in capture"
        assert kept[1] == "now·good" and kept[3] == "budget=4" and kept[2] == "kept"
        assert kept[4].startswith("accept ") and kept[4].endswith("up 1s")
        # The run's throughput, as the host's history recorded it.
        assert screen.history is not None
        recorded = next(e for e in screen.history.entries if e.n == 1).throughput
        assert recorded is not None and recorded.n > 0
        assert f" · {recorded.mean_tok_s:.1f} tok/s (n={recorded.n}) · " in kept[4]
        assert "@" in kept[6]  # who: user@machine
        assert original[2] == "original" and original[6] == "the unit's own files"
        assert original[3] == "the unit's own values"
        status = text_of(screen.query_one("#history-status", Static))
        assert "3 entries" in status and "now: entry 1" in status and "last good: entry 1" in status
        # The highlighted entry's details: the crash's last exception.
        detail = text_of(screen.query_one("#history-detail", Static))
        assert "last exception: torch.AcceleratorError: CUDA error" in detail
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, HistoryScreen))
        await pilot.press("q")


async def test_R_and_confirm_roll_back_to_the_configuration_before(
    fleet: SimFleet, capsys: pytest.CaptureFixture[str]
) -> None:
    assert await specops_set(fleet, "budget=4") == 0
    assert await specops_set(fleet, "budget=6") == 0
    assert (await specops_flags(fleet, capsys))["flags"]["budget"] == 6
    app = SpecopsApp(Fleet(load_fleet(fleet.profiles_dir)))
    async with app.run_test(size=(140, 44)) as pilot:
        await until(pilot, lambda: "budget" in getattr(app.fleet.status.get("b300"), "flags", {}))
        confirm = await open_confirm(app, pilot, "R")
        diff = text_of(confirm.query_one("#rollback-diff-text", Static))
        assert "-    --speculative-num-draft-tokens 6" in diff
        assert "+    --speculative-num-draft-tokens 4" in diff
        assert "back to history entry 1 (kept" in target_of(confirm)
        view = await confirm_and_run(app, pilot)
        assert view.result is not None and view.result.outcome is RolloutOutcome.APPLIED
        assert "rollback · b300" in text_of(view.query_one("#rollout-title", Static))
        steps = view.query_one("#rollout-table", DataTable)
        assert [str(steps.get_cell(k, "state")) for k in ("smoke test", "soak")] == ["ok", "ok"]
        # Its own entry, "started" while it ran, was never reported as a change left unfinished.
        await pilot.pause(0.5)
        assert not [n for n in app._notifications if "left on" in str(n.message)]
        assert not app.left_ons
        await pilot.press("escape")
        await pilot.press("q")
    flags = await specops_flags(fleet, capsys)
    assert flags["flags"]["budget"] == 4
    assert flags["last_good"]["history_entry"] == 3  # the rollback's own entry, kept
    assert "--speculative-num-draft-tokens 4" in fleet.hosts["b300"].local(DROPIN).read_text()


async def test_o_in_the_history_view_goes_back_to_the_units_original(
    fleet: SimFleet, capsys: pytest.CaptureFixture[str]
) -> None:
    assert await specops_set(fleet, "budget=4", "cuda_graph=off") == 0
    app = SpecopsApp(Fleet(load_fleet(fleet.profiles_dir)))
    async with app.run_test(size=(140, 44)) as pilot:
        await open_history(app, pilot)
        confirm = await open_confirm(app, pilot, "o")
        assert "the unit's own configuration" in target_of(confirm)
        view = await confirm_and_run(app, pilot)
        assert view.result is not None and view.result.outcome is RolloutOutcome.APPLIED
        await pilot.press("escape")
        # The history view, opened again, has the rollback on top, running now.
        screen = await open_history(app, pilot)
        top = rows(screen.query_one(DataTable))[0]
        assert top[0] == "2" and top[1] == "now·good" and top[2] == "kept (rollback)"
        await pilot.press("escape", "q")
    assert not fleet.hosts["b300"].local(DROPIN).exists()
    flags = (await specops_flags(fleet, capsys))["flags"]
    assert flags["budget"] == 8 and flags["cuda_graph"] is True


async def test_cancelling_the_confirm_leaves_the_host_unchanged(fleet: SimFleet) -> None:
    assert await specops_set(fleet, "budget=4") == 0
    host = fleet.hosts["b300"]
    dropin = host.local(DROPIN).read_text()
    app = SpecopsApp(Fleet(load_fleet(fleet.profiles_dir)))
    async with app.run_test(size=(140, 44)) as pilot:
        screen = await open_history(app, pilot)
        already = len(host.commands)
        # `Down Enter` in one read, as tmux delivers a send-keys: the cursor reaches entry 0
        # (the original) before enter acts on it.
        app.post_message(events.Key("down", None))
        app.post_message(events.Key("enter", "\r"))
        confirm = await open_confirm(app, pilot)
        assert "back to history entry 0 (original" in target_of(confirm)
        await pilot.press("escape")  # cancel: back in the history view
        await until(pilot, lambda: app.screen is screen)
        await open_confirm(app, pilot, "escape", "R")  # and `R` from the main screen
        await pilot.press("escape")
        await until(pilot, lambda: len(app.screen_stack) == 1)
        await pilot.pause(0.3)
        sent = host.commands[already:]
        assert any(c.startswith("systemctl cat") for c in sent)  # it was planned …
        assert not any(c.startswith(CHANGING) for c in sent)  # … and nothing changed
        await pilot.press("q")
    assert host.local(DROPIN).read_text() == dropin


async def test_read_only_refuses_rollbacks_but_shows_the_history(fleet: SimFleet) -> None:
    assert await specops_set(fleet, "budget=4") == 0
    messages: list[Message] = []
    app = SpecopsApp(Fleet(load_fleet(fleet.profiles_dir)), read_only=True)
    async with app.run_test(size=(140, 44), message_hook=messages.append) as pilot:
        await until(pilot, lambda: "budget" in getattr(app.fleet.status.get("b300"), "flags", {}))
        await pilot.press("R")
        await pilot.pause(0.1)
        assert len(app.screen_stack) == 1
        screen = await open_history(app, pilot)
        assert screen.history is not None and len(screen.history.entries) == 2
        await pilot.press("o", "enter")
        await pilot.pause(0.1)
        assert app.screen is screen  # no confirm opened
        notes = [m.notification.message for m in messages if isinstance(m, Notify)]
        assert notes.count("read-only: rollbacks are disabled") == 3
        await pilot.press("escape", "q")


async def test_an_unreachable_host_says_so_in_the_history_view(fleet: SimFleet) -> None:
    app = SpecopsApp(Fleet(load_fleet(fleet.profiles_dir)))
    async with app.run_test(size=(140, 44)) as pilot:
        await until(pilot, lambda: "budget" in getattr(app.fleet.status.get("b300"), "flags", {}))
        await fleet.hosts["b300"].go_offline()
        screen = await open_history(app, pilot)
        assert screen.history is None and screen.error is not None
        status = text_of(screen.query_one("#history-status", Static))
        assert status.startswith("cannot read the history of b300: b300:")
        assert screen.has_class("-error")
        await pilot.press("escape", "q")


async def test_the_view_says_it_is_reading_until_the_host_answers() -> None:
    answered = asyncio.Event()
    found = scripted_history()

    async def loader() -> HostHistory:
        await answered.wait()
        return found

    def planners(to: int | None, original: bool) -> Any:
        raise AssertionError("nothing is rolled back here")

    app = SpecopsApp(ScriptedFleet(profiles()))
    async with app.run_test(size=(120, 34)) as pilot:
        screen = HistoryScreen("b300", UNIT, loader, planners)
        await app.push_screen(screen)
        await pilot.pause(0.1)
        status = screen.query_one("#history-status", Static)
        assert text_of(status) == "reading the history on b300 …"
        assert screen.query_one(DataTable).row_count == 0
        answered.set()
        await until(pilot, lambda: screen.history is not None)
        assert text_of(status).startswith("now: entry 4 · last good: entry 4 · 5 entries")
        assert screen.query_one(DataTable).row_count == 5
        await pilot.press("escape", "q")
