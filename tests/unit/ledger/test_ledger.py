"""The ledger's records round-trip, are written once, and say which configuration ran when:
a bench file that names no configuration gets the one running on its host at its mtime."""

from __future__ import annotations

import json
import os
from datetime import datetime
from pathlib import Path

from console.findings.bench_files import load_bench
from console.ledger.ledger import Experiment, Side, WindowStats, load, running_at, save

B8: dict[str, object] = {"budget": 8, "cuda_graph": True}
B16: dict[str, object] = {"budget": 16, "cuda_graph": False}
B24: dict[str, object] = {"budget": 24, "cuda_graph": True}


def _experiment(
    started: str, outcome: str, before: dict[str, object], after: dict[str, object]
) -> Experiment:
    stats = WindowStats.of([4.36, 4.41])
    assert stats is not None
    return Experiment(
        "b300", "sglang-k26-ddtree.service", started, started, outcome,
        Side("a" * 32, before, {"accept_len": stats}), Side("b" * 32, after),
        signature="illegal_memory_access" if outcome != "kept" else None,
    )  # fmt: skip


def _ts(iso: str) -> float:
    return datetime.fromisoformat(iso).timestamp()


def test_records_round_trip_and_are_written_once(tmp_path: Path) -> None:
    experiment = _experiment("2026-12-03T10:00:00+00:00", "kept", B8, B16)
    path = save(experiment, tmp_path)
    mtime = path.stat().st_mtime_ns

    assert save(experiment, tmp_path) == path and path.stat().st_mtime_ns == mtime
    assert path.name == f"20261203T100000Z-{experiment.experiment_id}.json"
    ((_, loaded),) = load("b300", tmp_path)
    assert loaded == experiment
    assert json.loads(path.read_text())["format"] == "specops-experiment/1"
    (tmp_path / "junk.json").write_text("{")
    assert len(load("b300", tmp_path)) == 1


def test_running_at_follows_kept_changes_and_rollbacks() -> None:
    kept = ("k.json", _experiment("2026-12-03T10:00:00+00:00", "kept", B8, B16))
    crashed = ("c.json", _experiment("2026-12-03T11:00:00+00:00", "rolled_back", B16, B24))

    assert running_at([kept, crashed], _ts("2026-12-03T09:00:00+00:00")) == ("k.json", B8)
    assert running_at([kept, crashed], _ts("2026-12-03T10:30:00+00:00")) == ("k.json", B16)
    assert running_at([kept, crashed], _ts("2026-12-03T12:00:00+00:00")) == ("c.json", B16)
    assert running_at([], 0.0) is None


def test_a_bench_file_without_configuration_gets_the_ledgers_by_its_mtime(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    bench = package / "bench" / "results_b300" / "run.json"
    bench.parent.mkdir(parents=True)
    bench.write_text('{"1024": {"1": 303.0}}')
    os.utime(bench, (_ts("2026-12-03T10:30:00+00:00"),) * 2)
    (package / "snapshots").mkdir()
    (package / "MANIFEST.sha256").write_text("")
    path = save(
        _experiment("2026-12-03T10:00:00+00:00", "kept", B8, B16), package / "experiments" / "b300"
    )

    (loaded,) = load_bench([bench])

    assert loaded.config == {"host": "b300", **B16}
    assert loaded.config_source.startswith(f"experiments/b300/{path.name}")
    assert "running at the file's mtime" in loaded.config_source
