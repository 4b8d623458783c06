"""`specops sweep` against a simulated host, as an operator runs it: every cell a verified
change, the crashing one recorded and rolled back, cells beyond a crash skipped, the host
back where it started, a second campaign refused while one holds the host, and a campaign
whose console died resumed from its next cell."""

from __future__ import annotations

import asyncio
import functools
import json
import socket
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from console.cli import parse_args, sweep_output
from console.cli import set as cli_set
from console.cli import sweep as cli_sweep
from console.cli.snapshot import cmd_snapshot
from console.findings.report import build_report
from console.hosts.events import RolloutEvent, RolloutProgress, RolloutStep
from console.ledger import campaigns
from console.ledger.campaigns import Campaign, Cell
from console.service.status import read_status
from console.sim.fleet import SimFleet
from console.transport.host_files import STATE_ROOT
from console.tuning import change as tuning_change
from console.tuning.rollout import RolloutOptions
from tests.integration.test_rollout import connect

UNIT = "sglang-k26-ddtree.service"
QUICK = ("--soak", "1", "--measure", "1", "--yes", "--json")


async def sweep(sim: SimFleet, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, Any]:
    args = parse_args(["sweep", "b300", *argv, "--profiles", str(sim.profiles_dir)])
    capsys.readouterr()
    code = await cli_sweep.cmd_sweep(args)
    said = capsys.readouterr()
    print(said.err, file=sys.stderr, end="")  # kept for the test to read
    lines = said.out.splitlines()
    return code, json.loads(lines[-1]) if lines and lines[-1].startswith("{") else None


def host_history(sim: SimFleet) -> list[dict[str, Any]]:
    path = sim.hosts["b300"].local(f"/var/lib/specops/{UNIT}/history.json")
    entries: list[dict[str, Any]] = json.loads(path.read_text())["entries"]
    return entries


async def flags_now(sim: SimFleet) -> dict[str, Any]:
    from console.hosts.profiles import load_fleet

    session = await connect(load_fleet(sim.profiles_dir)[0])
    try:
        return dict((await read_status(session)).flags)
    finally:
        await session.close()


async def test_a_grid_with_a_crashing_cell_finishes_and_the_host_ends_where_it_began(
    sim: SimFleet, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    before = await flags_now(sim)
    code, record = await sweep(sim, capsys, "budget=4,16", "cuda_graph=on,off", *QUICK)
    assert code == 0 and record["state"] == "finished"
    outcomes = [
        (c["flags"]["budget"], c["flags"]["cuda_graph"], c["outcome"]) for c in record["cells"]
    ]
    assert outcomes == [
        (4, True, "measured"),
        (4, False, "measured"),
        (16, True, "crashed"),
        (16, False, "measured"),
    ]
    crashed = record["cells"][2]
    assert crashed["signature"] == "illegal_memory_access" and crashed["stage"] is not None
    measured = [c for c in record["cells"] if c["outcome"] == "measured"]
    assert all(c["accept_len"] and c["tok_s"] and c["n"] >= 1 for c in measured)
    assert record["baseline"]["tok_s"] and all(c["speedup"] for c in measured)
    assert record["best"] is not None
    assert await flags_now(sim) == before  # --keep original
    actions = [e.get("action") for e in host_history(sim)[1:]]
    assert actions == ["sweep-cell"] * 4 + ["sweep-end"]
    on_host = sim.hosts["b300"].local(record["path"])
    assert json.loads(on_host.read_text())["state"] == "finished"
    # A snapshot mirrors the campaign, and the findings report shows it from the package.
    package = tmp_path / "pkg"
    argv = ["snapshot", "b300", "--package", str(package), "--profiles", str(sim.profiles_dir)]
    assert await cmd_snapshot(parse_args(argv)) == 0
    mirrored = package / "campaigns" / "b300" / f"{record['campaign']}.json"
    assert mirrored.read_bytes() == on_host.read_bytes()
    report = build_report(package)
    assert f"### Campaign {record['campaign']} on b300" in report
    assert "Crash boundary: budget 16 crashed (illegal_memory_access" in report


async def test_a_cell_further_along_a_crashed_flag_is_skipped_and_keep_best_ends_on_it(
    sim: SimFleet, capsys: pytest.CaptureFixture[str]
) -> None:
    code, record = await sweep(sim, capsys, "budget=4,16,32", "--keep", "best", *QUICK)
    assert code == 0
    assert [c["outcome"] for c in record["cells"]] == ["measured", "crashed", "skipped"]
    assert "beyond a crash (budget 16 crashed" in record["cells"][2]["reason"]
    assert record["best"] == {"budget": 4}
    assert (await flags_now(sim))["budget"] == 4


BENCH = (
    "{python} -m sglang.bench_serving --backend sglang --max-concurrency 4 --output-file {{out}}"
)
"""The operator's benchmark, run with the host's SGLang interpreter."""


async def test_bench_runs_after_each_window_and_its_tok_s_is_read_back(
    sim: SimFleet, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """`--bench CMD`: the operator's benchmark on the host after each window, its result
    file (SGLang 0.5.23's bench_serving record) read back into the cell: budget 16 without
    graphs decodes at about half the baseline's tok/s, and the benchmark says the same."""
    bench = BENCH.format(python=sim.hosts["b300"].python)
    code, record = await sweep(sim, capsys, "budget=16", "cuda_graph=off", "--bench", bench, *QUICK)
    assert code == 0, capsys.readouterr().err
    base, (cell,) = record["baseline"], record["cells"]
    assert base["bench_tok_s"] > 1400 and base["bench_detail"] == "1 record"
    assert cell["outcome"] == "measured" and 700 < cell["bench_tok_s"] < 950
    assert 0.4 < cell["bench_speedup"] < 0.7
    on_host = sim.hosts["b300"].local(cell["bench_file"])
    written = json.loads(on_host.read_text())
    assert written["max_concurrency"] == 4 and written["output_throughput"] == cell["bench_tok_s"]
    assert cell["bench_file"].endswith(f"/campaigns/{record['campaign']}-bench/cell-01.jsonl")
    # A snapshot keeps each cell's result beside the campaign's record, verified.
    package = tmp_path / "pkg"
    argv = ["snapshot", "b300", "--package", str(package), "--profiles", str(sim.profiles_dir)]
    assert await cmd_snapshot(parse_args(argv)) == 0
    kept = package / "campaigns" / "b300" / f"{record['campaign']}-bench"
    assert sorted(p.name for p in kept.iterdir()) == ["baseline.jsonl", "cell-01.jsonl"]
    assert (kept / "cell-01.jsonl").read_bytes() == on_host.read_bytes()
    manifest = (package / "MANIFEST.sha256").read_text()
    assert f"campaigns/b300/{record['campaign']}-bench/cell-01.jsonl" in manifest


async def test_a_cell_that_dies_in_its_window_is_a_crash_with_its_signature(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """More than 128 running requests die in cuBLAS a while after ready (the simulator's real
    timeline): after the soak, inside the measurement window. The cell is a crash named by
    the journal's signature, and the host goes back to the start at once."""
    from console.sim.failures import FailureTiming
    from console.sim.sglang import Timing

    late = FailureTiming(requests=300, cublas_after_s=3.0)
    sim = SimFleet(tmp_path / "late", hosts=1, timing=Timing(0.3, 0.1, late))
    await sim.start()
    try:
        code, record = await sweep(
            sim, capsys, "max_running=256", "--soak", "1", "--measure", "6", "--yes", "--json"
        )
        assert code == 0, capsys.readouterr().err
        (cell,) = record["cells"]
        assert cell["outcome"] == "crashed" and cell["signature"] == "cublas"
        assert cell["stage"] in ("measure", "soak")  # soak only on a machine slow to check
        assert (await flags_now(sim))["max_running"] == 32
    finally:
        await asyncio.wait_for(sim.stop(), 10)


async def test_a_bench_command_that_fails_is_the_cells_note_not_the_campaigns_end(
    sim: SimFleet, capsys: pytest.CaptureFixture[str]
) -> None:
    failing = BENCH.format(python=sim.hosts["b300"].python).replace("4", "x")
    code, record = await sweep(sim, capsys, "budget=4", "--bench", failing, *QUICK)
    assert code == 0 and record["cells"][0]["outcome"] == "measured"
    assert record["cells"][0]["bench_tok_s"] is None
    assert record["cells"][0]["bench_detail"].startswith("exit 2: bench_serving:")


@pytest.mark.parametrize(
    ("bench", "said"),
    [
        ("python3 -m sglang.bench_serving --output-file out.json", "no {out} in it"),
        ("python3 -m sglang.bench_serving 'unbalanced", "No closing quotation"),
    ],
)
async def test_a_bench_command_that_cannot_work_is_refused_before_the_host_is_touched(
    sim: SimFleet, capsys: pytest.CaptureFixture[str], bench: str, said: str
) -> None:
    before = list(sim.hosts["b300"].commands)
    code, _ = await sweep(sim, capsys, "budget=4", "--bench", bench, *QUICK)
    assert code == 2
    assert said in capsys.readouterr().err
    assert sim.hosts["b300"].commands == before


async def test_a_second_campaign_is_refused_while_one_holds_the_host(
    sim: SimFleet, capsys: pytest.CaptureFixture[str]
) -> None:
    held = Campaign(
        id=campaigns.new_id(), host="b300", unit=UNIT, grid={"budget": [4]}, start={"budget": 8},
        owner="alice@elsewhere", owner_pid=1, cells=[Cell({"budget": 4})],
    )  # fmt: skip
    path = sim.hosts["b300"].local(campaigns.campaign_path(UNIT, held.id, STATE_ROOT))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(held.record()))
    args = parse_args(["sweep", "b300", "budget=4,8", *QUICK, "--profiles", str(sim.profiles_dir)])
    assert await cli_sweep.cmd_sweep(args) == 1
    said = capsys.readouterr().err
    assert f"campaign {held.id} of alice@elsewhere owns this host" in said
    # … and resuming it from here is refused too: its console may still be alive elsewhere
    code, _ = await sweep(sim, capsys, "--resume", held.id, *QUICK)
    assert code == 1


async def test_a_campaign_whose_console_died_is_resumed_from_its_next_cell(
    sim: SimFleet, capsys: pytest.CaptureFixture[str]
) -> None:
    gone = await asyncio.create_subprocess_exec(sys.executable, "-c", "pass")
    await gone.wait()  # a pid that existed and is gone: the console that was killed
    dead = gone.pid
    left = Campaign(
        id=campaigns.new_id(), host="b300", unit=UNIT, grid={"budget": [4, 6]},
        start={"budget": 8}, soak_s=1.0, measure_s=1.0,
        owner=f"op@{socket.gethostname()}", owner_pid=dead, current=1,
        baseline=Cell({"budget": 8}, outcome="baseline", tok_s=1600.0),
        cells=[Cell({"budget": 4}, outcome="measured", tok_s=1650.0), Cell({"budget": 6})],
        updated_at=time.time(),
    )  # fmt: skip
    path = sim.hosts["b300"].local(campaigns.campaign_path(UNIT, left.id, STATE_ROOT))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(left.record()))
    code, record = await sweep(sim, capsys, "--resume", left.id, "--yes", "--json")
    assert code == 0 and record["campaign"] == left.id
    assert [c["outcome"] for c in record["cells"]] == ["measured", "measured"]
    assert record["cells"][0]["tok_s"] == 1650.0  # the cell done before is not run again
    assert [e.get("action") for e in host_history(sim)[1:]] == ["sweep-cell", "sweep-end"]
    assert (await flags_now(sim))["budget"] == 8


def killed_campaign(sim: SimFleet, phase: str) -> Campaign:
    """The record a console SIGKILLed in `phase` leaves on the host (budget 4, 6 from 8)."""
    base = Cell({"budget": 8}, outcome="baseline", tok_s=1600.0)
    four = Cell({"budget": 4}, outcome="measured", tok_s=1650.0)
    six = Cell({"budget": 6}, outcome="measured", tok_s=1700.0)
    shapes = {
        "baseline": (None, None, [Cell({"budget": 4}), Cell({"budget": 6})]),
        "cell changed": (base, 1, [four, Cell({"budget": 6})]),
        "measuring": (base, 1, [four, Cell({"budget": 6})]),
        "ending": (base, None, [four, six]),
    }
    baseline, current, cells = shapes[phase]
    left = Campaign(
        id=campaigns.new_id(), host="b300", unit=UNIT, grid={"budget": [4, 6]},
        start={"budget": 8}, soak_s=1.0, measure_s=1.0, owner="op@elsewhere",
        current=current, baseline=baseline, cells=cells,
        updated_at=time.time() - campaigns.STALE_LOCK_S - 1,  # its console is long gone
    )  # fmt: skip
    path = sim.hosts["b300"].local(campaigns.campaign_path(UNIT, left.id, STATE_ROOT))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(left.record()))
    return left


@pytest.mark.parametrize(
    ("phase", "on_host", "actions", "outcomes"),
    [
        # Killed while measuring the baseline: it is measured again, then every cell runs.
        ("baseline", None, ["sweep-cell", "sweep-cell", "sweep-end"], ["measured", "measured"]),
        # Killed after the third cell's flags reached the host, before they were verified:
        # back to the start first, then the cell as any other.
        ("cell changed", 6, ["sweep-end", "sweep-cell", "sweep-end"], ["measured", "measured"]),
        # Killed in the window of a kept cell: the same (the cell's numbers were never saved).
        ("measuring", 6, ["sweep-end", "sweep-cell", "sweep-end"], ["measured", "measured"]),
        # Killed on the way back to the start, every cell done: only the way back is left.
        ("ending", 6, ["sweep-end"], ["measured", "measured"]),
    ],
)
async def test_a_campaign_killed_in_any_phase_is_resumed_and_ends_where_it_began(
    sim: SimFleet,
    capsys: pytest.CaptureFixture[str],
    phase: str,
    on_host: int | None,
    actions: list[str],
    outcomes: list[str],
) -> None:
    if on_host is not None:  # the host as the killed console left it
        args = parse_args(["set", "b300", f"budget={on_host}", "--yes", "--soak", "1"])
        args.profiles = str(sim.profiles_dir)
        assert await cli_set.cmd_set(args) == 0
    history = sim.hosts["b300"].local(f"/var/lib/specops/{UNIT}/history.json")
    before = len(host_history(sim)) if history.exists() else 0
    left = killed_campaign(sim, phase)
    code, record = await sweep(sim, capsys, "--resume", left.id, "--yes", "--json")
    assert code == 0 and record["state"] == "finished", capsys.readouterr().err
    assert [c["outcome"] for c in record["cells"]] == outcomes
    assert record["baseline"]["tok_s"]
    if phase == "ending":  # cells done before are not run again
        assert [c["tok_s"] for c in record["cells"]] == [1650.0, 1700.0]
    after = [e for e in host_history(sim)[before:] if e["outcome"] != "original"]
    assert [e.get("action") for e in after] == actions
    assert (await flags_now(sim))["budget"] == 8


async def test_a_link_lost_for_good_in_a_cell_exits_3_and_the_record_says_where(
    sim: SimFleet, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    host = sim.hosts["b300"]
    quick = functools.partial(RolloutOptions, reconnect_s=1.5, poll_s=0.2, settle_s=2.0)
    monkeypatch.setattr(tuning_change, "RolloutOptions", quick)
    dropped: list[asyncio.Task[None]] = []

    class DropInSecondCell(sweep_output.CellPrinter):
        def rollout(self, event: RolloutEvent) -> None:
            super().rollout(event)
            second = "cell 2/" in self._cell
            restart = isinstance(event, RolloutProgress) and event.step is RolloutStep.RESTART
            if second and restart and not dropped:
                dropped.append(asyncio.create_task(host.go_offline()))

    monkeypatch.setattr(cli_sweep, "CellPrinter", DropInSecondCell)
    try:
        code, _ = await sweep(sim, capsys, "budget=4,6", *QUICK)
    finally:
        await asyncio.gather(*dropped)
        await host.go_online()
    assert dropped and code == 3
    assert "the link was lost" in capsys.readouterr().err
    (record,) = [
        json.loads(p.read_text())
        for p in host.local(campaigns.campaigns_dir(UNIT, STATE_ROOT)).glob("*.json")
    ]
    # Written before the link went, never after: running, in the cell it stopped in (what a
    # resume, once this console has exited, goes on from).
    assert record["state"] == "running" and record["current"] == 1
    assert [c["outcome"] for c in record["cells"]] == ["measured", "pending"]


async def test_split_deals_the_grid_out_among_hosts_and_a_crash_prunes_for_all(
    sim: SimFleet, capsys: pytest.CaptureFixture[str]
) -> None:
    names = list(sim.hosts)
    argv = ["sweep", *names, "budget=4,6,16,32", "--split", *QUICK]
    args = parse_args([*argv, "--profiles", str(sim.profiles_dir)])
    capsys.readouterr()
    code = await cli_sweep.cmd_sweep(args)
    said = capsys.readouterr()
    assert code == 0, said.err
    record = json.loads(said.out.splitlines()[-1])
    assert record["split"] is True and len(record["campaigns"]) == 2
    first, second = record["campaigns"]
    # Dealt out in turn: each host its share, the whole grid between them, each its baseline.
    assert [c["flags"]["budget"] for c in first["cells"]] == [4, 16]
    assert [c["flags"]["budget"] for c in second["cells"]] == [6, 32]
    assert first["host"] == names[0] and second["host"] == names[1]
    assert first["baseline"]["tok_s"] and second["baseline"]["tok_s"]
    assert first["cells"][1]["outcome"] == "crashed"  # budget 16 with graphs
    # 32 ran at the same time as 16 or after its crash: pruned for every host, or crashed.
    assert second["cells"][1]["outcome"] in ("skipped", "crashed")
    for name in names:
        host_record = sim.hosts[name].local(
            campaigns.campaign_path(
                UNIT, (first if name == names[0] else second)["campaign"], STATE_ROOT
            )
        )
        assert json.loads(host_record.read_text())["split"] == names
    assert f"{names[1]}: cell 1/2" in said.err  # lines name their host
    # Simulated hosts have no nvidia-smi: said, not refused.
    assert f"GPU model unknown on {names[0]}, {names[1]}" in said.err


async def test_split_over_different_gpus_is_refused_before_anything_changes(
    sim: SimFleet, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same release on both, but eight H100s against four (names as the reference H100's
    nvidia-smi prints them): one grid would compare different machines."""
    names = list(sim.hosts)
    sim.hosts[names[0]].gpus = ["NVIDIA H100 80GB HBM3"] * 8
    sim.hosts[names[1]].gpus = ["NVIDIA H100 80GB HBM3"] * 4
    argv = ["sweep", *names, "budget=4,6", "--split", *QUICK]
    capsys.readouterr()
    assert await cli_sweep.cmd_sweep(parse_args([*argv, "--profiles", str(sim.profiles_dir)])) == 2
    said = capsys.readouterr().err
    assert "--split needs one GPU model" in said
    assert f"{names[0]} 8× NVIDIA H100 80GB HBM3, {names[1]} 4× NVIDIA H100 80GB HBM3" in said
    for host in sim.hosts.values():
        assert not any(c.startswith(("tee ", "mv ", "systemctl restart")) for c in host.commands)


async def test_split_over_different_releases_is_refused_before_anything_changes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from console.sim.sglang import Timing

    timing = Timing(load_s=0.3, decode_interval_s=0.1)
    mixed = SimFleet(
        tmp_path / "mixed", hosts=2, timing=timing, versions=("0.5.9-ddtree", "0.5.23")
    )
    await mixed.start()
    try:
        names = list(mixed.hosts)
        argv = ["sweep", *names, "budget=4,6", "--split", *QUICK]
        assert (
            await cli_sweep.cmd_sweep(parse_args([*argv, "--profiles", str(mixed.profiles_dir)]))
            == 2
        )
        assert "--split needs one SGLang release" in capsys.readouterr().err
        for host in mixed.hosts.values():
            assert not any(
                c.startswith(("tee ", "mv ", "systemctl restart")) for c in host.commands
            )
    finally:
        await asyncio.wait_for(mixed.stop(), 10)
