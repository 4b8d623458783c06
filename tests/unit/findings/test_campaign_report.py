"""The report's campaign section, from a package's mirrored campaign records only: the grid
with crashed cells marked, the best stable cell, the crash boundary; byte for byte the same
from the same package."""

from __future__ import annotations

import json
from pathlib import Path

from console.findings.report import build_report
from console.hosts.profiles import FlagValue
from console.ledger.campaigns import Campaign, Cell, text_of

ID = "20261207T080745Z-75851a"


def campaign(state: str = "finished", updated_at: float = 1_800_000_100.0) -> Campaign:
    def ran(budget: int, graph: bool, tok_s: float, accept: float) -> Cell:
        values: dict[str, FlagValue] = {"budget": budget, "cuda_graph": graph}
        return Cell(values, "measured", accept_len=accept, accept_len_sd=0.04, tok_s=tok_s,
                    tok_s_sd=30.0, n=10)  # fmt: skip

    crashed = Cell(
        {"budget": 16, "cuda_graph": True}, "crashed", signature="illegal_memory_access",
        stage="soak", reason="crash: illegal_memory_access during decoding",
    )  # fmt: skip
    return Campaign(
        id=ID, host="b300", unit="sglang-k26-ddtree.service",
        grid={"budget": [4, 16], "cuda_graph": [True, False]},
        start={"budget": 8, "cuda_graph": True, "topk": 4}, measure_s=10.0, state=state,
        baseline=Cell({"budget": 8, "cuda_graph": True, "topk": 4}, "baseline", tok_s=1600.0,
                      tok_s_sd=20.0, accept_len=4.4, accept_len_sd=0.05, n=10),
        cells=[ran(4, True, 1650.0, 3.5), ran(4, False, 820.0, 3.5), crashed,
               ran(16, False, 790.0, 5.7)],
        end="on the configuration it started on: budget=8 cuda_graph=on topk=4",
        created_at=1_800_000_000.0, updated_at=updated_at,
    )  # fmt: skip


def package_with(tmp_path: Path, *records: Campaign) -> Path:
    package = tmp_path / "pkg"
    directory = package / "campaigns" / "b300"
    directory.mkdir(parents=True)
    for n, record in enumerate(records):
        (directory / f"{record.id}{'' if n == 0 else f'.{n}'}.json").write_text(text_of(record))
    (directory / "not-a-campaign.json").write_text(json.dumps({"format": "other"}))
    return package


def test_the_grid_the_best_cell_and_the_crash_boundary_are_reported(tmp_path: Path) -> None:
    package = package_with(tmp_path, campaign())
    report = build_report(package)
    assert f"### Campaign {ID} on b300" in report
    assert "| 3 | budget=16 cuda_graph=on | **crashed** (illegal_memory_access, soak) |" in report
    assert "| 1 | budget=4 cuda_graph=on | measured | 3.50 ± 0.04 | 1650 ± 30 | 1.03× |" in report
    assert "| baseline | budget=8 cuda_graph=on | baseline |" in report
    assert "Best stable cell: budget=4 cuda_graph=on, 1650 tok/s (1.03× the baseline)." in report
    assert (
        "Crash boundary: budget 16 crashed (illegal_memory_access, soak) where 4 ran, "
        "with cuda_graph=on." in report
    )
    assert f"](campaigns/b300/{ID}.json)" in report  # the record behind the numbers
    assert build_report(package) == report


def test_a_campaign_mirrored_twice_is_reported_once_from_its_newest_record(
    tmp_path: Path,
) -> None:
    running = campaign(state="running", updated_at=1_800_000_050.0)
    package = package_with(tmp_path, running, campaign())
    report = build_report(package)
    assert report.count(f"### Campaign {ID}") == 1
    assert "4 cells, finished" in report
