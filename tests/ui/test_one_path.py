"""One change, one path (console/tuning/change.py): the same change and the same rollback,
once from the CLI and once from the TUI, leave the same audit actions, history entries and
ledger records, apart from times, ids, measured numbers and the name of the front end; and
the value of a `secret = true` flag is in none of them, nor on the terminal."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from console.app import SpecopsApp
from console.cli import parse_args
from console.cli import rollback as cli_rollback
from console.cli import set as cli_set
from console.fleet.fleet import Fleet
from console.hosts.events import RolloutOutcome
from console.hosts.profiles import load_fleet
from console.local.audit import ActionRecord, AuditLog
from console.local.settings import state_dir
from console.sim.fleet import SimFleet
from tests.ui.support import applied, simulated_fleet, until
from tests.ui.test_flag_editor import open_editor
from tests.ui.test_history_view import confirm_and_run, open_confirm

UNIT = "sglang-k26-ddtree.service"
STATE = f"/var/lib/specops/{UNIT}"
SECRET = "sk-XYZ-one-path"
SECRET_FLAG = '\n[flags.api_key]\narg = "--api-key"\ntype = "str"\nsecret = true\n'
VARIES = {
    # when, which run, who measured what: not what the change was
    "time", "started_at", "finished_at", "started", "finished", "invocation_id", "invocation",
    "accept_len", "throughput", "windows", "source",
}  # fmt: skip


def with_a_secret_flag(sim: SimFleet) -> None:
    profile = sim.profiles_dir / "b300.toml"
    profile.write_text(profile.read_text() + SECRET_FLAG)


def normal(record: Any) -> Any:
    """`record` without what differs between two runs of the same change."""
    if isinstance(record, dict):
        return {k: normal(v) for k, v in record.items() if k not in VARIES}
    if isinstance(record, list):
        return [normal(v) for v in record]
    return record


def records(sim: SimFleet) -> dict[str, Any]:
    """The host's history and ledger as files on the host, oldest first."""
    host = sim.hosts["b300"]
    history = json.loads(host.local(f"{STATE}/history.json").read_text())["entries"]
    ledger = [json.loads(p.read_text()) for p in host.local(f"{STATE}/experiments").glob("*")]
    ledger.sort(key=lambda e: e["started"])
    return {"history": history, "ledger": ledger}


def actions() -> list[dict[str, Any]]:
    found = [e for e in AuditLog().entries() if isinstance(e, ActionRecord)]
    return [json.loads(e.to_json()) for e in found]


def files_under(*roots: Path) -> Iterator[Path]:
    for root in roots:
        yield from (p for p in root.rglob("*") if p.is_file())


async def through_the_cli(sim: SimFleet) -> None:
    for command, argv in (
        (cli_set.cmd_set, ["set", "b300", "budget=4", f"api_key={SECRET}", "--yes"]),
        (cli_rollback.cmd_rollback, ["rollback", "b300", "--yes"]),
    ):
        args = parse_args([*argv, "--profiles", str(sim.profiles_dir)])
        assert await command(args) == 0


async def through_the_tui(sim: SimFleet) -> None:
    app = SpecopsApp(Fleet(load_fleet(sim.profiles_dir)))
    async with app.run_test(size=(140, 44)) as pilot:
        editor = await open_editor(app, pilot)
        await pilot.press("enter", "backspace", "4", "enter")  # budget 8 → 4
        await pilot.press(*["down"] * 6, "enter", *SECRET, "enter")  # api_key, the last row
        await pilot.press("d")
        await until(pilot, lambda: editor.plan is not None)
        view = await applied(pilot)
        assert view.result is not None and view.result.outcome is RolloutOutcome.APPLIED
        await pilot.press("escape")
        await until(pilot, lambda: len(app.screen_stack) == 1)
        await open_confirm(app, pilot, "R")
        back = await confirm_and_run(app, pilot)
        assert back.result is not None and back.result.outcome is RolloutOutcome.APPLIED
        await pilot.press("escape")
        await until(pilot, lambda: not app.workers._workers or all(
            w.is_finished for w in app.workers if w.group.startswith("rollout:")
        ))  # fmt: skip
        await pilot.press("q")


async def test_cli_and_tui_leave_the_same_records_and_no_secret(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    async with simulated_fleet(tmp_path / "cli", hosts=1, decode_interval_s=0.1) as sim:
        with_a_secret_flag(sim)
        await through_the_cli(sim)
        by_cli = records(sim)
        cli_host = sim.hosts["b300"].local(STATE)
        terminal = capsys.readouterr()
    cli_actions = actions()
    async with simulated_fleet(tmp_path / "tui", hosts=1, decode_interval_s=0.1) as sim:
        with_a_secret_flag(sim)
        await through_the_tui(sim)
        by_tui = records(sim)
        tui_host = sim.hosts["b300"].local(STATE)
    tui_actions = actions()[len(cli_actions) :]

    assert [a["action"] for a in cli_actions] == ["set", "rollback"]
    assert normal(tui_actions) == normal(cli_actions)
    assert "api_key unset → ***" in cli_actions[0]["intent"]
    assert [e["action"] for e in by_cli["history"][1:]] == ["set", "rollback"]
    assert normal(by_tui["history"]) == normal(by_cli["history"])
    assert [(e["action"], e["outcome"]) for e in by_cli["ledger"]] == [
        ("set", "kept"),
        ("rollback", "kept"),
    ]
    assert normal(by_tui["ledger"]) == normal(by_cli["ledger"])
    assert [e["source"] for e in by_cli["ledger"] + by_tui["ledger"]] == ["cli"] * 2 + ["tui"] * 2

    assert SECRET not in terminal.out + terminal.err
    for path in files_under(state_dir(), cli_host, tui_host):
        assert SECRET not in path.read_text(errors="replace"), path
