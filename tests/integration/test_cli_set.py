"""`specops set`, `flags` and `audit` as a user runs them, against simulated hosts."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from console.cli import audit as cli_audit
from console.cli import flags as cli_flags
from console.cli import main, parse_args
from console.cli import rollback as cli_rollback
from console.cli import set as cli_set
from console.local.audit import AuditLog
from console.sim.fleet import SimFleet, ThreadedSimFleet
from console.sim.host import SimHost
from console.sim.sglang import Timing

UNIT = "sglang-k26-ddtree.service"
DROPIN = f"/etc/systemd/system/{UNIT}.d/zz-specops.conf"
CHANGING: tuple[str, ...] = ("tee ", "mv ", "rm ", "mkdir ", "sudo ", "systemctl daemon-reload")
CHANGING += ("systemctl restart", "systemctl reset-failed")


def audited(host: str) -> list[str]:
    return [r.command for r in AuditLog().read() if r.host == host]


def test_set_budget_16_with_cuda_graphs_rolls_back_and_audits_every_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sim = ThreadedSimFleet(
        SimFleet(tmp_path / "sim", hosts=1, timing=Timing(load_s=0.3, decode_interval_s=0.1))
    )
    sim.start()
    try:
        profiles = str(sim.fleet.profiles_dir)
        code = main(["set", "b300", "budget=16", "--yes", "--profiles", profiles])
        captured = capsys.readouterr()
        assert code == 1
        assert "b300: rolled back" in captured.out
        assert "illegal_memory_access during CUDA graph capture" in captured.out
        assert "back on budget=8" in captured.out and "healthy" in captured.out
        assert "an illegal memory access was encountered" in captured.err  # the excerpt
        assert "✓ rollback: wait ready" in captured.err
        host = sim.fleet.hosts["b300"]
        assert not host.local(DROPIN).exists()
        # Every command the host received is in the audit log, with its exit status.
        assert sorted(audited("b300")) == sorted(host.commands)
        assert any(c.startswith("systemctl restart") for c in audited("b300"))
        records = list(AuditLog().read())
        assert all(r.exit == 0 for r in records if r.command.startswith(("tee", "mv", "rm")))
        assert main(["flags", "b300", "--json", "--profiles", profiles]) == 0
        record = json.loads(capsys.readouterr().out)
        assert record["flags"]["budget"]["value"] == 8
        assert record["flags"]["cuda_graph"]["value"] is True
        assert record["last_good"] is None
    finally:
        sim.stop()


async def test_set_budget_16_without_graphs_applies_and_reports_the_new_accept_length(
    sim: SimFleet, capsys: pytest.CaptureFixture[str]
) -> None:
    profiles = str(sim.profiles_dir)
    args = parse_args(["set", "b300", "budget=16", "cuda_graph=false", "--yes"])
    args.profiles = profiles
    assert await cli_set.cmd_set(args) == 0
    out = capsys.readouterr().out
    assert "b300: applied budget 8 → 16, cuda_graph on → off; healthy" in out
    # Probation is the console's: the operator learns a watch or the TUI must run for it.
    assert "b300: on probation for " in out
    assert "rolled back only while `specops watch` or the TUI runs" in out
    accept = float(out.rsplit("accept len ", 1)[1].split()[0].rstrip(","))
    assert 5.3 <= accept <= 6.4  # budget 16 without graphs, not the old invocation's ~4.4
    flags = parse_args(["flags", "b300", "--json"])
    flags.profiles = profiles
    assert await cli_flags.cmd_flags(flags) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["flags"]["budget"]["value"] == 16
    assert record["flags"]["cuda_graph"]["value"] is False
    assert record["last_good"]["values"]["budget"] == 16
    assert record["execstart_source"] == DROPIN
    # Setting what is already there is a no-op, not a restart.
    sent = len(sim.hosts["b300"].commands)
    again = parse_args(["set", "b300", "budget=16", "--yes"])
    again.profiles = profiles
    assert await cli_set.cmd_set(again) == 0
    assert "nothing to change" in capsys.readouterr().out
    assert not any(c.startswith(CHANGING) for c in sim.hosts["b300"].commands[sent:])
    # Going back is the operator's choice, not on probation: the rollback does not say it is
    # (it did, while `watch` said "not on probation").
    back = parse_args(["rollback", "b300", "--original", "--yes"])
    back.profiles = profiles
    assert await cli_rollback.cmd_rollback(back) == 0
    out = capsys.readouterr().out
    assert "b300: applied budget 16 → 8" in out and "probation" not in out


async def test_set_budget_32_is_rolled_back_on_the_wrong_smoke_answer(
    sim: SimFleet, capsys: pytest.CaptureFixture[str]
) -> None:
    eager = parse_args(["set", "b300", "cuda_graph=off", "--yes"])  # else budget 32 crashes
    eager.profiles = str(sim.profiles_dir)
    assert await cli_set.cmd_set(eager) == 0
    capsys.readouterr()
    args = parse_args(["set", "b300", "budget=32", "--yes"])
    args.profiles = str(sim.profiles_dir)
    assert await cli_set.cmd_set(args) == 1
    out = capsys.readouterr().out
    assert "b300: rolled back: smoke test: '2+2=' answered" in out and "expected '4'" in out
    assert "back on budget=8 topk=4 cuda_graph=off" in out


async def test_soak_flag_sets_how_long_the_change_must_stay_up(
    sim: SimFleet, capsys: pytest.CaptureFixture[str]
) -> None:
    args = parse_args(["set", "b300", "budget=4", "--soak", "2.5", "--yes"])
    args.profiles = str(sim.profiles_dir)
    assert await cli_set.cmd_set(args) == 0
    captured = capsys.readouterr()
    assert "stayed up 2.5s" in captured.out
    assert "soak  2.5s on invocation" in captured.err


@pytest.mark.parametrize("soak", ["-1", "nan", "inf", "soon"])
def test_a_bad_soak_is_refused_before_any_host_is_contacted(
    soak: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        parse_args(["set", "b300", "budget=4", "--soak", soak, "--yes"])
    assert exited.value.code == 2
    assert "--soak" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("assignment", "message"),
    [
        ("budget=8; rm -rf /", "must be a whole number"),
        ("budget=-1", "must be between 1 and 1024"),
        ("nosuchflag=1", "no such flag in profile 'b300'"),
    ],
)
async def test_bad_values_exit_2_and_send_nothing(
    sim: SimFleet, capsys: pytest.CaptureFixture[str], assignment: str, message: str
) -> None:
    args = parse_args(["set", "b300", assignment, "--yes"])
    args.profiles = str(sim.profiles_dir)
    assert await cli_set.cmd_set(args) == 2
    assert message in capsys.readouterr().err
    assert sim.hosts["b300"].commands == []
    assert list(AuditLog().read()) == []


async def test_dry_run_prints_the_diff_and_changes_nothing(
    sim: SimFleet, capsys: pytest.CaptureFixture[str]
) -> None:
    host: SimHost = sim.hosts["b300"]
    invocation = host.unit.invocation_id
    args = parse_args(["set", "b300", "budget=16", "topk=8", "--dry-run"])
    args.profiles = str(sim.profiles_dir)
    assert await cli_set.cmd_set(args) == 0
    out = capsys.readouterr().out
    assert "-    --speculative-num-draft-tokens 8" in out
    assert "+    --speculative-num-draft-tokens 16" in out
    assert '+Environment="SGLANG_DDTREE_MAX_TOPK=8"' in out
    assert f"dry run: would write {DROPIN}" in out and "Nothing was changed." in out
    assert host.commands  # it did read the unit and ask the build for its flags ...
    assert not any(c.startswith(CHANGING) for c in host.commands)  # ... and nothing else
    assert not host.local(DROPIN).exists() and host.unit.invocation_id == invocation


async def test_read_only_refuses_a_change(
    sim: SimFleet, capsys: pytest.CaptureFixture[str]
) -> None:
    args = parse_args(["--read-only", "set", "b300", "budget=16", "--yes"])
    args.profiles = str(sim.profiles_dir)
    assert await cli_set.cmd_set(args) == 2
    assert "refusing to change b300: --read-only" in capsys.readouterr().err
    assert sim.hosts["b300"].commands == []


async def test_unreachable_host_exits_3(sim: SimFleet, capsys: pytest.CaptureFixture[str]) -> None:
    await sim.hosts["b300"].go_offline()
    args = parse_args(["set", "b300", "budget=4", "--yes"])
    args.profiles = str(sim.profiles_dir)
    assert await cli_set.cmd_set(args) == 3
    assert "b300: unreachable" in capsys.readouterr().err


async def test_audit_lists_commands_newest_last(
    sim: SimFleet, capsys: pytest.CaptureFixture[str]
) -> None:
    flags = parse_args(["flags", "b300"])
    flags.profiles = str(sim.profiles_dir)
    assert await cli_flags.cmd_flags(flags) == 0
    assert "budget" in capsys.readouterr().out
    await asyncio.sleep(0)
    assert cli_audit.cmd_audit(parse_args(["audit", "--json", "--all"])) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["command"] for r in lines] == sim.hosts["b300"].commands
    assert all(r["host"] == "b300" and r["exit"] == 0 for r in lines)
    assert set(lines[0]) == {"time", "host", "command", "exit", "duration_s"}
    assert cli_audit.cmd_audit(parse_args(["audit", "-n", "1", "--all"])) == 0
    text = capsys.readouterr().out.splitlines()
    newest = sim.hosts["b300"].commands[-1]  # `flags` asks the release last
    assert len(text) == 1 and "exit 0" in text[0] and text[0].endswith(newest)
    assert "import sglang" in newest


@pytest.mark.parametrize("presses", [1, 2])
def test_ctrl_c_during_a_change_asks_first(tmp_path: Path, presses: int) -> None:
    sim = ThreadedSimFleet(
        SimFleet(tmp_path / "sim", hosts=1, timing=Timing(load_s=1.5, decode_interval_s=0.2))
    )
    sim.start()
    try:
        argv = ["set", "b300", "budget=16", "cuda_graph=off", "--yes"]
        proc = subprocess.Popen(
            [sys.executable, "-m", "console", *argv, "--profiles", str(sim.fleet.profiles_dir)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert proc.stderr is not None
        seen: list[str] = []
        for line in proc.stderr:
            seen.append(line)
            if "✓ new invocation" in line:
                proc.send_signal(signal.SIGINT)  # while the server loads
                break
        if presses == 2:
            for line in proc.stderr:
                seen.append(line)
                if "press Ctrl-C again" in line:
                    proc.send_signal(signal.SIGINT)
                    break
        out, err = proc.communicate(timeout=60)
        err = "".join(seen) + err
        assert "press Ctrl-C again within 5s to abandon it half way" in err
        if presses == 1:  # asked, and carried on to the end
            assert proc.returncode == 0, err
            assert "b300: applied budget 8 → 16, cuda_graph on → off; healthy" in out
        else:
            assert proc.returncode == 130, err
            assert "abandoned half way; check `specops status b300`" in err
            assert "applied" not in out
    finally:
        sim.stop()
