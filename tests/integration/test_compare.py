"""The experiment ledger and `specops compare` on the simulated fleet: budget 8 → 16 without
CUDA graphs raises accept length and lowers throughput, with n and spread; a change that
crashed and was rolled back is listed as rolled back and never as best. The ledger lives on
the host: another console (another profile directory, another name for the host) sees the
same experiments, two changes recorded at once both land, and `specops rollback` records one
too."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from types import ModuleType

import pytest

from console.cli import common, main, parse_args
from console.cli import compare as cli_compare
from console.cli import rollback as cli_rollback
from console.cli import set as cli_set
from console.cli import snapshot as cli_snapshot
from console.cli.common import connect
from console.hosts.profiles import load_fleet
from console.ledger.ledger import (
    Experiment,
    Side,
    WindowStats,
    host_dir,
    load,
    load_from_host,
    save_on_host,
)
from console.sim.fleet import SimFleet
from console.transport.host_files import STATE_ROOT

UNIT = "sglang-k26-ddtree.service"


def on_host(sim: SimFleet, name: str = "b300") -> list[Path]:
    """The experiment files in the simulated host's own /var/lib/specops/UNIT/experiments."""
    return sorted(sim.hosts[name].local(host_dir(UNIT, STATE_ROOT)).glob("*.json"))


def second_console(sim: SimFleet, tmp_path: Path, name: str) -> str:
    """Another profile directory naming the host `b300` differently (as another operator's
    console would), and with its own state directory."""
    directory = tmp_path / "other-console"
    directory.mkdir()
    text = (sim.profiles_dir / "b300.toml").read_text()
    (directory / f"{name}.toml").write_text(text.replace('name = "b300"', f'name = "{name}"'))
    return str(directory)


async def _run(module: ModuleType, argv: list[str], profiles: str) -> int:
    args = parse_args(argv)
    args.profiles = profiles
    command = {cli_compare: "cmd_compare", cli_set: "cmd_set", cli_rollback: "cmd_rollback"}
    return int(await getattr(module, command[module])(args))


@pytest.fixture(autouse=True)
def wide_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")  # tables printed whole
    # Rich fixes a console's width from COLUMNS when the console is made (at import, in
    # whichever test imported it first): set it on the CLI's console too.
    monkeypatch.setattr(common.out, "width", 200)


async def change(host: str, profiles: str, *assignments: str) -> int:
    """`specops set HOST NAME=VALUE... --yes`; its exit status."""
    return await _run(cli_set, ["set", host, *assignments, "--yes"], profiles)


async def test_budget_16_eager_shows_accept_up_throughput_down_and_a_crash_is_never_best(
    sim: SimFleet, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    profiles = str(sim.profiles_dir)
    await asyncio.sleep(2)  # budget 8 with graphs logs decode lines for a while first
    assert await change("b300", profiles, "budget=16", "cuda_graph=false") == 0
    (recorded,) = on_host(sim)
    said = capsys.readouterr().out
    assert f"experiment recorded on the host: {host_dir(UNIT, STATE_ROOT)}/{recorded.name}" in said
    assert [p.name for p, _ in load("b300")] == [recorded.name]  # the console's cache
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
    kv = configs[b]["windows"]["token_usage"]  # each configuration's KV-cache use (issue 41)
    assert kv["count"] > 5 and 0 < kv["mean"] < 1
    after = configs[b]["windows"]["accept_len"]
    assert after["count"] > 5 and after["stddev"] > 0  # n and spread, not one sample
    assert 5.3 <= after["mean"] <= 6.4
    assert len({r["invocation"] for r in configs[b]["runs"]}) == 1  # one run, counted once
    assert "re-measured" not in record["note"] and "measured again" in record["note"]
    assert record["read_from"] == f"the host's ledger ({host_dir(UNIT, STATE_ROOT)})"

    # Budget 24 with graphs crashes in capture and is rolled back: listed, never best.
    assert await change("b300", profiles, "budget=24", "cuda_graph=true") == 1
    capsys.readouterr()
    assert await _run(cli_compare, ["compare", "b300", "--json"], profiles) == 0
    record = json.loads(capsys.readouterr().out)
    crashed = next(c for c in record["configurations"] if c["flags"]["budget"] == 24)
    assert crashed["rolled_back"] and "illegal_memory_access" in crashed["status"]
    assert record["best"] != crashed["number"]
    assert len(on_host(sim)) == 2
    ((_, last),) = [e for e in load("b300")][-1:]
    assert last.outcome == "rolled_back" and last.phase is not None
    assert last.release == sim.hosts["b300"].sglang_version

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
    # The package holds the host's files byte for byte.
    assert [p.read_bytes() for p in mirrored] == [p.read_bytes() for p in on_host(sim)]
    capsys.readouterr()
    assert main(["report", str(package), "--json"]) == 0
    written = json.loads(capsys.readouterr().out)  # stdout: the one JSON object
    assert written == {
        "path": str(package / "REPORT.md"),
        "written": True,
        "manifest_refreshed": True,
    }
    report = (package / "REPORT.md").read_text()
    assert "**rolled back**: illegal_memory_access during CUDA graph capture" in report
    kept = next(line for line in report.splitlines() if "→ budget=16 cuda_graph=off" in line)
    assert 5.3 <= float(kept.split("| kept; accept ", 1)[1].split()[0]) <= 6.4
    assert f"(experiments/b300/{mirrored[0].name})" in kept
    accept_rows = [line for line in report.splitlines() if line.startswith("| change after:")]
    assert any("budget=16 cuda_graph=off" in line for line in accept_rows)
    # The ledger's best is what stayed and ran fastest (budget 8 with graphs); budget 24 is no
    # candidate, and every experiment sits under the release it ran.
    release = sim.hosts["b300"].sglang_version
    assert f"## b300 · SGLang {release}" in report
    best_line = next(line for line in report.splitlines() if "From the experiment ledger" in line)
    assert "**budget=8 cuda_graph=on" in best_line and "tok/s (n=" in best_line
    assert "- not a candidate: budget=24 cuda_graph=on" in report
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


async def test_another_console_naming_the_host_differently_sees_the_same_ledger(
    sim: SimFleet,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    await asyncio.sleep(1)
    assert await change("b300", str(sim.profiles_dir), "budget=16", "cuda_graph=false") == 0
    capsys.readouterr()

    # Another operator's console: its own state directory (no cache), its own name for the host.
    monkeypatch.setenv("SPECOPS_STATE_DIR", str(tmp_path / "other-state"))
    other = second_console(sim, tmp_path, "gpu-a")
    assert load("gpu-a") == []
    assert await _run(cli_compare, ["compare", "gpu-a", "--json"], other) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["read_from"] == f"the host's ledger ({host_dir(UNIT, STATE_ROOT)})"
    flags = [c["flags"] for c in record["configurations"]]
    assert {"budget": 16, "cuda_graph": False}.items() <= flags[-1].items()
    assert [p.name for p, _ in load("gpu-a")] == [p.name for p in on_host(sim)]  # now cached

    # Its own change lands in the same ledger, and the first console sees both.
    assert await change("gpu-a", other, "budget=8", "cuda_graph=true") == 0
    capsys.readouterr()
    assert len(on_host(sim)) == 2
    monkeypatch.delenv("SPECOPS_STATE_DIR")
    assert await _run(cli_compare, ["compare", "b300", "--json"], str(sim.profiles_dir)) == 0
    record = json.loads(capsys.readouterr().out)
    configs = record["configurations"]  # budget 8 → 16 → 8 again: two configurations
    assert [c["flags"]["budget"] for c in configs] == [8, 16]
    assert {r["experiment"] for c in configs for r in c["runs"]} == {1, 2}

    # The host unreachable: the cached copy, and the output says so.
    await sim.hosts["b300"].go_offline()
    assert await _run(cli_compare, ["compare", "b300", "--json"], str(sim.profiles_dir)) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["read_from"] == "the console's cached copy of its ledger (host unreachable)"
    assert {r["experiment"] for c in record["configurations"] for r in c["runs"]} == {1, 2}


def _experiment(host: str, started: str, budget: int) -> Experiment:
    accept = WindowStats.of([4.4, 4.5])
    assert accept is not None
    return Experiment(
        host, UNIT, started, started, "kept",
        Side("a" * 32, {"budget": 8}), Side("b" * 32, {"budget": budget}, {"accept_len": accept}),
    )  # fmt: skip


async def test_two_consoles_recording_at_the_same_moment_both_land(sim: SimFleet) -> None:
    (profile, *_) = load_fleet(sim.profiles_dir)
    first, second = await connect(profile), await connect(profile)
    assert first is not None and second is not None
    try:
        one = _experiment("b300", "2026-12-04T01:00:00+00:00", 16)
        two = _experiment("gpu-a", "2026-12-04T01:00:00+00:00", 12)  # the same second
        paths = await asyncio.gather(save_on_host(first, one), save_on_host(second, two))
        assert len(set(paths)) == 2
        found = await load_from_host(first)
        assert sorted(e.after.flags["budget"] for _, e in found) == [12, 16]
        assert {p for p, _ in found} == set(paths)
    finally:
        await first.close()
        await second.close()


async def test_specops_rollback_records_an_experiment_of_kind_rollback(
    sim: SimFleet, capsys: pytest.CaptureFixture[str]
) -> None:
    profiles = str(sim.profiles_dir)
    await asyncio.sleep(1)
    assert await change("b300", profiles, "budget=16", "cuda_graph=false") == 0
    assert await _run(cli_rollback, ["rollback", "b300", "--yes"], profiles) == 0
    assert "experiment recorded on the host: " in capsys.readouterr().out
    made, rollback = (e for _, e in load("b300"))
    assert (made.kind, rollback.kind) == ("change", "rollback")
    assert rollback.outcome == "kept" and rollback.after.flags["budget"] == 8
    assert rollback.before.flags["budget"] == 16 and rollback.before.invocation
    assert rollback.before.invocation == made.after.invocation
    assert len(on_host(sim)) == 2
    # What the rollback gave up is rolled back in compare, never best.
    assert await _run(cli_compare, ["compare", "b300", "--json"], profiles) == 0
    record = json.loads(capsys.readouterr().out)
    given_up = next(c for c in record["configurations"] if c["flags"]["budget"] == 16)
    assert given_up["rolled_back"] and given_up["status"] == "rolled back: by `specops rollback`"
    assert record["best"] != given_up["number"]
