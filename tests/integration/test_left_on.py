"""The next `specops status` says which configuration a change that did not end left the host
on (issue 20, item 7): from the host's history and the main process's own command line."""

from __future__ import annotations

import json
from typing import Any

import pytest

from console.cli import parse_args
from console.cli import set as cli_set
from console.cli.flags import cmd_flags
from console.cli.status import cmd_status
from console.hosts.events import RolloutStep
from console.sim.fleet import SimFleet
from console.transport import remote
from tests.integration.test_dropped_link import set_losing_the_link_at


async def status(sim: SimFleet, capsys: pytest.CaptureFixture[str], *extra: str) -> str:
    args = parse_args(["status", "b300", "--profiles", str(sim.profiles_dir), *extra])
    assert await cmd_status(args) == 0
    return capsys.readouterr().out


async def test_a_change_that_lost_its_link_is_named_by_the_next_status(
    sim: SimFleet, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The link goes for good during the soak: budget 4 runs, nothing could be recorded."""
    assert await set_losing_the_link_at(sim, RolloutStep.SOAK, monkeypatch) == 3
    capsys.readouterr()
    said = " ".join((await status(sim, capsys)).split())
    assert "b300 left on: budget=4 topk=4 cuda_graph=on nvls=off" in said
    assert "(set #1 by " in said and "it set" not in said  # budget 4 is what runs
    assert "never finished: the console stopped or lost the link (or still runs))" in said
    (record,) = [json.loads(line) for line in (await status(sim, capsys, "--json")).splitlines()]
    left = record["left_on"]
    assert left["flags"]["budget"] == 4 and left["source"] == "running command"
    assert (left["entry"], left["kind"], left["outcome"]) == (1, "change", "started")


def files_say_budget_16(sim: SimFleet) -> None:
    """A change stopped between daemon-reload and restart: NeedDaemonReload=no, the files
    say budget 16, the process still runs budget 8."""
    unit = sim.hosts["b300"].unit
    fragment = unit.local(unit.fragment).read_text()
    dropin = unit.local(f"{unit.dropin_dir}/zz-specops.conf")
    dropin.parent.mkdir(parents=True, exist_ok=True)
    exec_start = fragment.split("ExecStart=", 1)[1].split("\nRestart=", 1)[0]
    new = exec_start.replace(
        "--speculative-num-draft-tokens 8", "--speculative-num-draft-tokens 16"
    )
    dropin.write_text(f"[Service]\nExecStart=\nExecStart={new}\n")
    unit.daemon_reload()


async def test_files_reloaded_but_not_restarted_say_what_really_runs(
    sim: SimFleet, capsys: pytest.CaptureFixture[str]
) -> None:
    files_say_budget_16(sim)
    said = " ".join((await status(sim, capsys)).split())
    assert "NeedDaemonReload=yes" not in said
    assert "b300 left on: budget=8 topk=4 cuda_graph=on nvls=off" in said
    assert "(the unit files say budget=16; not restarted since)" in said
    (record,) = [json.loads(line) for line in (await status(sim, capsys, "--json")).splitlines()]
    assert record["flags"]["budget"] == 16  # the files'
    assert record["left_on"]["flags"]["budget"] == 8 and "entry" not in record["left_on"]
    # `flags` shows the files' values in its table, and says what runs above it
    assert await cmd_flags(parse_args(["flags", "b300", "--profiles", str(sim.profiles_dir)])) == 0
    said = " ".join(capsys.readouterr().out.split())
    assert "left on: budget=8 topk=4" in said and "the unit files say budget=16" in said


async def test_set_after_files_not_restarted_says_what_runs_above_its_diff(
    sim: SimFleet, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 30: after an interrupted change the next `set`'s diff started from the files'
    budget 16 as if it ran; and asking for budget 16 said only "nothing to change"."""
    files_say_budget_16(sim)
    profiles = ["--profiles", str(sim.profiles_dir)]
    assert (
        await cli_set.cmd_set(parse_args(["set", "b300", "budget=12", "--dry-run", *profiles])) == 0
    )
    said = capsys.readouterr()
    shown = " ".join((said.out + said.err).split())
    assert "b300 left on: budget=8 topk=4" in shown and "the unit files say budget=16" in shown
    assert "the diff below starts from the unit files" in shown
    assert await cli_set.cmd_set(parse_args(["set", "b300", "budget=16", "--yes", *profiles])) == 0
    said = capsys.readouterr()
    shown = " ".join((said.out + said.err).split())
    assert "nothing to change" in shown and "b300 left on: budget=8" in shown
    assert "restarting sglang-k26-ddtree.service applies them" in shown
    # A host as its files say: no such line.
    sim.hosts["b300"].unit.local(f"{sim.hosts['b300'].unit.dropin_dir}/zz-specops.conf").unlink()
    sim.hosts["b300"].unit.daemon_reload()
    assert await cli_set.cmd_set(parse_args(["set", "b300", "budget=8", "--yes", *profiles])) == 0
    assert "left on" not in " ".join(capsys.readouterr().err.split())


async def test_a_host_as_its_files_say_gets_no_left_on_line(
    sim: SimFleet, capsys: pytest.CaptureFixture[str]
) -> None:
    said = await status(sim, capsys)
    assert "left on" not in said
    (record,) = [json.loads(line) for line in (await status(sim, capsys, "--json")).splitlines()]
    assert "left_on" not in record


async def test_a_failed_change_left_in_place_is_named_with_why(
    sim: SimFleet, capsys: pytest.CaptureFixture[str]
) -> None:
    """`set --no-rollback` of a setting that fails its smoke test: the history says so."""
    args = parse_args(["set", "b300", "budget=32", "cuda_graph=off", "--yes", "--no-rollback"])
    args.profiles = str(sim.profiles_dir)
    assert await cli_set.cmd_set(args) == 1
    capsys.readouterr()
    said = " ".join((await status(sim, capsys)).split())
    assert "b300 left on: budget=32 topk=4 cuda_graph=off" in said
    assert "(set #1 by " in said
    assert "failed; not rolled back (--no-rollback): the new setting is in place)" in said


async def test_a_link_lost_while_status_reads_is_exit_3(
    sim: SimFleet, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    real = remote.systemctl_show

    def show_as_the_link_goes(*args: Any, **kwargs: Any) -> remote.Command:
        sim.hosts["b300"].abort_connections()
        return real(*args, **kwargs)

    monkeypatch.setattr(remote, "systemctl_show", show_as_the_link_goes)
    args = parse_args(["status", "b300", "--json", "--profiles", str(sim.profiles_dir)])
    assert await cmd_status(args) == 3
    (record,) = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert record["connection"] == "unreachable" and record["connected"] is False
