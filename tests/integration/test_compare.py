"""The experiment ledger and `specops compare` on the simulated fleet: budget 8 → 16 without
CUDA graphs raises accept length and lowers throughput, with n and spread; a change that
crashed and was rolled back is listed as rolled back and never as best."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from console.cli import compare as cli_compare
from console.cli import main, parse_args
from console.cli import set as cli_set
from console.cli import snapshot as cli_snapshot
from console.evidence.ledger import load
from console.sim.fleet import SimFleet


async def _run(module: object, argv: list[str], profiles: str) -> int:
    args = parse_args(argv)
    args.profiles = profiles
    command = module.cmd_compare if module is cli_compare else module.cmd_set  # type: ignore[attr-defined]
    return int(await command(args))


async def test_budget_16_eager_shows_accept_up_throughput_down_and_a_crash_is_never_best(
    sim: SimFleet,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    profiles = str(sim.profiles_dir)
    await asyncio.sleep(2)  # budget 8 with graphs logs decode lines for a while first
    assert (
        await _run(cli_set, ["set", "b300", "budget=16", "cuda_graph=false", "--yes"], profiles)
        == 0
    )
    assert "experiment recorded: " in capsys.readouterr().out
    await asyncio.sleep(2)  # and budget 16 eager for a while after

    assert await _run(cli_compare, ["compare", "b300", "--json"], profiles) == 0
    record = json.loads(capsys.readouterr().out)
    a, b = record["a"], record["b"]
    configs = {c["number"]: c for c in record["configurations"]}
    assert "budget=8" in " ".join(f"{k}={v}" for k, v in configs[a]["flags"].items())
    assert configs[b]["flags"]["budget"] == 16 and configs[b]["flags"]["cuda_graph"] is False
    deltas = {d["series"]: d for d in record["deltas"]}
    assert deltas["accept_len"]["delta"] > 0 and deltas["gen_throughput"]["delta"] < 0
    assert deltas["accept_len"]["beyond_spread"] and deltas["gen_throughput"]["beyond_spread"]
    after = configs[b]["windows"]["accept_len"]
    assert after["count"] > 5 and after["stddev"] > 0  # n and spread, not one sample
    assert 5.3 <= after["mean"] <= 6.4
    assert len({r["invocation"] for r in configs[b]["runs"]}) == 1  # one run, counted once
    assert "re-measured" not in record["note"] and "measured again" in record["note"]

    # Budget 24 with graphs crashes in capture and is rolled back: listed, never best.
    assert (
        await _run(cli_set, ["set", "b300", "budget=24", "cuda_graph=true", "--yes"], profiles) == 1
    )
    capsys.readouterr()
    assert await _run(cli_compare, ["compare", "b300", "--json"], profiles) == 0
    record = json.loads(capsys.readouterr().out)
    crashed = next(c for c in record["configurations"] if c["flags"]["budget"] == 24)
    assert crashed["rolled_back"] and "illegal_memory_access" in crashed["status"]
    assert record["best"] != crashed["number"]
    ((_, last),) = [e for e in load("b300")][-1:]
    assert last.outcome == "rolled_back" and last.phase is not None

    assert await _run(cli_compare, ["compare", "b300", "1", "2", "--offline"], profiles) == 0
    table = capsys.readouterr().out
    assert "rolled back: illegal_memory_access" in table and "beyond spread" in table

    # A snapshot mirrors the ledger into the package; the report cites it.
    package = tmp_path / "pkg"
    args = parse_args(["snapshot", "b300", "--package", str(package)])
    args.profiles = profiles
    assert await cli_snapshot.cmd_snapshot(args) == 0
    mirrored = sorted((package / "experiments" / "b300").glob("*.json"))
    assert len(mirrored) == 2
    assert all(
        f"experiments/b300/{p.name}" in (package / "MANIFEST.sha256").read_text() for p in mirrored
    )
    assert main(["report", str(package)]) == 0
    report = (package / "REPORT.md").read_text()
    assert "**rolled back**: illegal_memory_access during CUDA graph capture" in report
    kept = next(line for line in report.splitlines() if "→ budget=16 cuda_graph=off" in line)
    assert 5.3 <= float(kept.split("| kept; accept ", 1)[1].split()[0]) <= 6.4
    assert f"(experiments/b300/{mirrored[0].name})" in kept
    accept_rows = [line for line in report.splitlines() if line.startswith("| change after:")]
    assert any("budget=16 cuda_graph=off" in line for line in accept_rows)
    check = await asyncio.create_subprocess_exec(
        "sha256sum",
        "--strict",
        "-c",
        "MANIFEST.sha256",
        cwd=package,
        stdout=asyncio.subprocess.DEVNULL,
    )
    assert await check.wait() == 0


async def test_compare_without_experiments_and_bad_pair(
    sim: SimFleet, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    profiles = str(sim.profiles_dir)
    assert await _run(cli_compare, ["compare", "b300"], profiles) == 1
    assert "no experiments recorded yet" in capsys.readouterr().err
    assert await _run(cli_compare, ["compare", "b300", "1"], profiles) == 2
