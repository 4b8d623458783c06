"""History and last good on the host; `specops history` and `specops rollback`, as a user runs them.

Every check reads what a second console would: the host's own `/var/lib/specops/UNIT/
history.json` (through the CLI), the unit's drop-in, the running flags.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from console.cli import flags as cli_flags
from console.cli import history as cli_history
from console.cli import parse_args
from console.cli import rollback as cli_rollback
from console.cli import set as cli_set
from console.hosts.events import RolloutEvent, RolloutProgress, RolloutStep
from console.hosts.profiles import Profile, load_fleet
from console.service.status import read_status
from console.service.unit import effective_service
from console.sim.fleet import SimFleet
from console.transport import remote
from console.tuning import history
from console.tuning.history import HistoryEntry
from console.tuning.plan import parse_assignments, read_plan
from console.tuning.rollout import Rollout, RolloutOptions
from tests.integration.test_rollout import connect

UNIT = "sglang-k26-ddtree.service"
DROPIN = f"/etc/systemd/system/{UNIT}.d/zz-specops.conf"
HISTORY = f"/var/lib/specops/{UNIT}/history.json"


async def cli(
    module: Any, argv: list[str], profiles: Path, capsys: pytest.CaptureFixture[str]
) -> tuple[int, str, str]:
    args = parse_args(argv)
    args.profiles = str(profiles)
    command = {
        cli_set: cli_set.cmd_set,
        cli_history: cli_history.cmd_history,
        cli_rollback: cli_rollback.cmd_rollback,
    }[module]
    code = await command(args)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


async def history_of(
    host: str, profiles: Path, capsys: pytest.CaptureFixture[str]
) -> dict[str, Any]:
    code, out, _ = await cli(cli_history, ["history", host, "--json"], profiles, capsys)
    assert code == 0
    record: dict[str, Any] = json.loads(out)
    return record


def outcomes(record: dict[str, Any]) -> list[tuple[int, str, str]]:
    return [(e["n"], e["kind"], e["outcome"]) for e in record["entries"]]


async def test_history_records_each_change_and_the_original_newest_first(
    sim: SimFleet, capsys: pytest.CaptureFixture[str]
) -> None:
    profiles = sim.profiles_dir
    assert await history_of("b300", profiles, capsys) == {
        "host": "b300",
        "unit": UNIT,
        "path": HISTORY,
        "last_good": None,
        "entries": [],
    }
    assert (await cli(cli_set, ["set", "b300", "budget=4", "--yes"], profiles, capsys))[0] == 0
    assert (await cli(cli_set, ["set", "b300", "budget=16", "--yes"], profiles, capsys))[0] == 1
    record = await history_of("b300", profiles, capsys)
    assert outcomes(record) == [
        (2, "change", "rolled_back"),
        (1, "change", "kept"),
        (0, "original", "original"),
    ]
    assert record["last_good"] == 1
    crashed, kept, original = record["entries"]
    assert crashed["values"]["budget"] == 16 and crashed["signature"] == "illegal_memory_access"
    assert crashed["stage"] == "capture" and "CUDA error" in crashed["exception_line"]
    assert crashed["restarts"] is not None  # read before reset-failed cleared it
    assert kept["values"]["budget"] == 4 and kept["soaked_s"] == 1.0 and kept["who"]
    # The run's generation throughput: the soak's decode lines, as the server logged them
    # (the simulator generates 760-1740 tok/s).
    assert kept["throughput"]["n"] > 0 and 700 < kept["throughput"]["mean_tok_s"] < 1800
    assert crashed["throughput"] is None  # it never reached the soak
    assert kept["dropin"] == sim.hosts["b300"].local(DROPIN).read_text()
    assert original["values"]["budget"] == 8 and original["dropin"] is None
    # The file is the host's: written in one step, nothing half-written left beside it.
    directory = sim.hosts["b300"].local(HISTORY).parent
    # (Beside it, the experiment ledger: one file per change, no temporary left either.)
    assert sorted(p.name for p in directory.iterdir()) == ["experiments", "history.json"]
    assert all(p.suffix == ".json" for p in (directory / "experiments").iterdir())

    code, text, _ = await cli(cli_history, ["history", "b300"], profiles, capsys)
    assert code == 0
    lines = text.splitlines()
    assert "  2  rolled_back  set" in lines[1] and "budget=16" in lines[1]
    assert any("last exception: torch.AcceleratorError: CUDA error" in line for line in lines)
    mean, n = kept["throughput"]["mean_tok_s"], kept["throughput"]["n"]
    assert any(f"gen {mean:.1f} tok/s (n={n})" in line for line in lines)
    assert lines[-1] == "* last good: entry 1 (kept)"


async def test_two_profile_directories_naming_the_host_differently_agree(
    sim: SimFleet, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = tmp_path / "other-fleet"
    other.mkdir()
    text = (sim.profiles_dir / "b300.toml").read_text()
    (other / "gpu-a.toml").write_text(text.replace('name = "b300"', 'name = "gpu-a"'))
    assert load_fleet(other)[0].name == "gpu-a"
    assert (await cli(cli_set, ["set", "b300", "budget=4", "--yes"], sim.profiles_dir, capsys))[
        0
    ] == 0
    mine = await history_of("b300", sim.profiles_dir, capsys)
    theirs = await history_of("gpu-a", other, capsys)
    assert theirs["entries"] == mine["entries"] and theirs["last_good"] == mine["last_good"] == 1
    # A change from the other directory goes on the same history.
    assert (await cli(cli_set, ["set", "gpu-a", "budget=6", "--yes"], other, capsys))[0] == 0
    mine = await history_of("b300", sim.profiles_dir, capsys)
    assert [(e["n"], e["profile"]) for e in mine["entries"]] == [
        (2, "gpu-a"),
        (1, "b300"),
        (0, "b300"),
    ]
    assert mine["last_good"] == 2
    # `flags` shows the same last good from either directory.
    for name, directory in (("b300", sim.profiles_dir), ("gpu-a", other)):
        args = parse_args(["flags", name, "--json"])
        args.profiles = str(directory)
        assert await cli_flags.cmd_flags(args) == 0
        good = json.loads(capsys.readouterr().out)["last_good"]
        assert good["history_entry"] == 2 and good["values"]["budget"] == 6


async def test_rollback_returns_to_the_configuration_before_the_current_one(
    sim: SimFleet, capsys: pytest.CaptureFixture[str]
) -> None:
    profiles = sim.profiles_dir
    host = sim.hosts["b300"]
    assert (await cli(cli_set, ["set", "b300", "budget=4", "--yes"], profiles, capsys))[0] == 0
    assert (await cli(cli_set, ["set", "b300", "budget=6", "--yes"], profiles, capsys))[0] == 0

    code, out, err = await cli(cli_rollback, ["rollback", "b300", "--dry-run"], profiles, capsys)
    assert code == 0 and "back to history entry 1" in out
    assert "-    --speculative-num-draft-tokens 6" in out
    assert "+    --speculative-num-draft-tokens 4" in out and "Nothing was changed." in out

    code, out, err = await cli(cli_rollback, ["rollback", "b300", "--yes"], profiles, capsys)
    assert code == 0, out + err
    assert "b300: applied budget 6 → 4" in out
    for step in ("smoke test", "soak", "history"):  # the full rollout, like `set`
        assert f"✓ {step}" in err
    session = await connect(load_fleet(profiles)[0])
    try:
        assert (await read_status(session)).flags["budget"] == 4
    finally:
        await session.close()
    record = await history_of("b300", profiles, capsys)
    assert outcomes(record)[0] == (3, "rollback", "kept") and record["last_good"] == 3

    code, out, err = await cli(
        cli_rollback, ["rollback", "b300", "--original", "--yes"], profiles, capsys
    )
    assert code == 0, out + err
    assert not host.local(DROPIN).exists()  # specops' drop-in is gone
    assert effective_service(host.unit.cat()).argv == host.unit.loaded.argv  # type: ignore[union-attr]
    record = await history_of("b300", profiles, capsys)
    assert outcomes(record)[0] == (4, "rollback", "kept")
    assert record["entries"][0]["dropin"] is None
    assert record["entries"][0]["values"]["budget"] == 8

    code, _, err = await cli(cli_rollback, ["rollback", "b300", "--to", "9"], profiles, capsys)
    assert code == 1 and "no history entry 9 (there are 0, 1, 2, 3, 4)" in err


async def test_an_abandoned_change_is_recorded_and_the_next_run_reports_it(
    sim: SimFleet, capsys: pytest.CaptureFixture[str]
) -> None:
    profile = load_fleet(sim.profiles_dir)[0]
    session = await connect(profile)
    try:
        plan = await read_plan(session, parse_assignments(profile, ["budget=4"]))
        restarting = asyncio.Event()

        def on_event(event: RolloutEvent) -> None:
            if isinstance(event, RolloutProgress) and event.step is RolloutStep.INVOCATION:
                restarting.set()

        options = RolloutOptions(poll_s=0.2, soak_s=5.0)
        task = asyncio.create_task(Rollout(session, plan, on_event=on_event, options=options).run())
        await asyncio.wait_for(restarting.wait(), 20)
        task.cancel()  # the console is gone half way (as after Ctrl-C twice, or a kill)
        with pytest.raises(asyncio.CancelledError):
            await task
        cat = await session.run(remote.systemctl_cat(profile.service.unit))
        assert effective_service(cat.stdout).argv  # the unit still parses
    finally:
        await session.close()
    record = await history_of("b300", sim.profiles_dir, capsys)
    assert outcomes(record)[0] == (1, "change", "started")
    code, text, _ = await cli(cli_history, ["history", "b300"], sim.profiles_dir, capsys)
    assert "started (still running, or abandoned)" in text

    code, out, err = await cli(
        cli_set, ["set", "b300", "budget=6", "--yes"], sim.profiles_dir, capsys
    )
    assert code == 0, out + err
    assert "history entry 1 (set by " in err and "was abandoned half way" in err
    record = await history_of("b300", sim.profiles_dir, capsys)
    assert outcomes(record)[:2] == [(2, "change", "kept"), (1, "change", "abandoned")]


async def test_a_damaged_history_refuses_the_change_and_records_no_experiment(
    sim: SimFleet, capsys: pytest.CaptureFixture[str]
) -> None:
    host = sim.hosts["b300"]
    path = host.local(HISTORY)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text('{"version": 1, "entries": "x"}')
    dropin = host.local(DROPIN)
    before = dropin.read_text() if dropin.exists() else None
    code, out, err = await cli(
        cli_set, ["set", "b300", "budget=4", "--yes"], sim.profiles_dir, capsys
    )
    assert code == 1
    assert f"{HISTORY} is not a specops history (no list of entries)" in out + err
    assert "nothing was changed" in out + err and "experiment" not in out + err
    assert not host.local(f"/var/lib/specops/{UNIT}/experiments").exists()
    assert (dropin.read_text() if dropin.exists() else None) == before
    code, out, err = await cli(cli_history, ["history", "b300"], sim.profiles_dir, capsys)
    assert "Traceback" not in out + err and "is not a specops history" in out + err


async def test_one_console_claims_a_probation_rollback(profiles: list[Profile]) -> None:
    """Of two consoles at the end of one countdown, the first to make the claim rolls back
    (both counting down at once; the two-watch test may see the second come after)."""
    entry = HistoryEntry(
        n=3,
        kind="change",
        action="set",
        outcome="kept",
        values={},
        argv=(),
        environment={},
        dropin=None,
        finished_at=1e9,
    )
    first, second = await connect(profiles[0]), await connect(profiles[0])
    try:
        assert await history.claim_probation_rollback(first, UNIT, entry) is True
        assert await history.claim_probation_rollback(second, UNIT, entry) is False
        later = replace(entry, finished_at=2e9)  # a history begun again: the same number
        assert await history.claim_probation_rollback(second, UNIT, later) is True
    finally:
        await first.close()
        await second.close()
