"""A bench file too large to decode whole: `sglang.bench_serving --output-details` (SGLang
0.5.23, `benchmark/serving.py`) appends `result | result_details` per run, every request's
input and output lengths, TTFT, inter-token latencies and generated text after the summary.
A valid file of 100 MB was cut at 64 MiB and labelled a crashed run; now its summary counts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from console.findings import bench, json_members
from console.findings.bench import Shape, read_bench
from console.findings.json_members import read_objects

FIXTURE = Path(__file__).parents[2] / "fixtures" / "bench" / "sglang-0.5.23_bench_serving.jsonl"


def _with_details(run: dict[str, object], requests: int) -> str:
    """One run as `--output-details` writes it: the summary, then the per-request lists."""
    text = 'Hello "world" {not a brace} [nor a bracket] \\ end ' * 20
    details = {
        "input_lens": [1024] * requests,
        "output_lens": [1024] * requests,
        "ttfts": [0.0883] * requests,
        "itls": [[0.0033] * 50 for _ in range(requests)],
        "generated_texts": [text] * requests,
        "errors": [""] * requests,
    }
    return json.dumps(run | details) + "\n"


@pytest.fixture
def small_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    """The same paths at a size a unit test writes quickly: files over 64 KiB are read by
    members, and members over 16 KiB are stepped over."""
    monkeypatch.setattr(bench, "MAX_BYTES", 64 << 10)
    monkeypatch.setattr(json_members, "SMALL", 16 << 10)


def _runs() -> list[dict[str, object]]:
    return [json.loads(line) for line in FIXTURE.read_text().splitlines()]


@pytest.mark.usefixtures("small_limits")
def test_a_run_with_its_request_details_counts_like_its_summary(tmp_path: Path) -> None:
    runs = _runs()
    path = tmp_path / "k26_ddtree_details.jsonl"
    path.write_text("".join(_with_details(run, 200) for run in runs))
    assert path.stat().st_size > 8 * bench.MAX_BYTES

    found = read_bench(path)
    plain = read_bench(FIXTURE)
    assert found.shape is Shape.SERVING and not found.crashed
    assert [p.throughput for p in found.points] == [p.throughput for p in plain.points]
    assert [p.concurrency for p in found.points] == [p.concurrency for p in plain.points]
    assert found.config == plain.config and found.config["speculative_algorithm"] == "DDTREE"
    assert found.size == path.stat().st_size
    assert bench.parse_bench(str(path), path.read_bytes()) == found  # as read from a host


@pytest.mark.usefixtures("small_limits")
def test_a_large_file_cut_mid_run_keeps_the_runs_before_it(tmp_path: Path) -> None:
    first, second = (_with_details(run, 200) for run in _runs())
    path = tmp_path / "cut.jsonl"
    path.write_text(first + second[: len(second) // 2])
    found = read_bench(path)
    assert found.shape is Shape.SERVING and len(found.points) == 1
    assert found.points[0].concurrency == _runs()[0]["max_concurrency"]

    path.write_text(first[: len(first) // 2])  # died inside its first run's details
    crashed = read_bench(path)
    assert crashed.crashed and "cut short" in crashed.detail
    assert crashed.config["speculative_algorithm"] == "DDTREE"  # what it wrote before dying
    assert crashed.config_source == "file (what was written before it was cut off)"


def test_members_are_stepped_over_whatever_they_hold() -> None:
    deep = "[" * 100_000 + "]" * 100_000
    tricky = json.dumps({"s": 'a "quoted" } ] \\ { [', "n": [1, {"x": "]"}]})
    data = f'{{"deep": {deep}, "ok": 1, "t": {tricky}}}\n {{"b": "c"}}'.encode()
    found = read_objects(data)
    assert found.records == [{"ok": 1, "t": json.loads(tricky)}, {"b": "c"}]
    assert found.skipped == ["deep (not readable JSON)"] and found.problem == ""
    assert read_objects(b'{"a": 1} [1]').problem == "not a JSON object at byte 9"
    cut = read_objects(b'{"a": 1, "b": "unterminated')
    assert cut.records == [] and cut.partial == {"a": 1} and "cut short" in cut.problem
