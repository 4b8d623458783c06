"""Bench files read by content: SGLang 0.5.23's bench_serving and bench_one_batch_server
outputs (fixtures built from their field lists, see tests/fixtures/bench/README.md), the
campaign's sweep matrices in the shapes such scripts write, and the 122-byte crashed run."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from console.cli import main
from console.findings.bench import (
    SERVING_ACCEPT_NOTE,
    Shape,
    choose_baseline,
    parse_bench,
    read_bench,
    speedup_table,
)
from console.findings.bench_view import speedup_text

FIXTURES = Path(__file__).parents[2] / "fixtures" / "bench"
SERVING = FIXTURES / "sglang-0.5.23_bench_serving.jsonl"
ONE_BATCH = FIXTURES / "sglang-0.5.23_bench_one_batch_server.jsonl"
AR, B8, CRASHED = (FIXTURES / f"B300_{v}.json" for v in ("ar", "nvlsb8t4", "b12t6"))

# The keys of `result` in sglang 0.5.23 sglang/benchmark/serving.py, in its order.
SERVING_FIELDS = [
    "tag",
    "backend",
    "dataset_name",
    "request_rate",
    "max_concurrency",
    "sharegpt_output_len",
    "random_input_len",
    "random_output_len",
    "random_range_ratio",
    "server_info",
    "duration",
    "completed",
    "total_input_tokens",
    "total_input_text_tokens",
    "total_input_vision_tokens",
    "total_output_tokens",
    "total_output_tokens_retokenized",
    "request_throughput",
    "input_throughput",
    "output_throughput",
    "total_throughput",
    "mean_e2e_latency_ms",
    "median_e2e_latency_ms",
    "std_e2e_latency_ms",
    "p90_e2e_latency_ms",
    "p95_e2e_latency_ms",
    "p99_e2e_latency_ms",
    "mean_ttft_ms",
    "median_ttft_ms",
    "std_ttft_ms",
    "p90_ttft_ms",
    "p95_ttft_ms",
    "p99_ttft_ms",
    "mean_tpot_ms",
    "median_tpot_ms",
    "std_tpot_ms",
    "p90_tpot_ms",
    "p95_tpot_ms",
    "p99_tpot_ms",
    "mean_itl_ms",
    "median_itl_ms",
    "std_itl_ms",
    "p90_itl_ms",
    "p95_itl_ms",
    "p99_itl_ms",
    "concurrency",
    "accept_length",
    "max_output_tokens_per_s",
    "max_concurrent_requests",
]
# BenchOneCaseResult.dump_to_jsonl in sglang 0.5.23 sglang/benchmark/one_batch_server.py.
ONE_BATCH_FIELDS = [
    "run_name",
    "batch_size",
    "input_len",
    "output_len",
    "latency",
    "input_throughput",
    "output_throughput",
    "overall_throughput",
    "last_ttft",
    "last_gen_throughput",
    "acc_length",
    "total_output_tokens",
    "num_early_stopped",
    "steady_state_output_throughput",
    "steady_state_window_s",
    "cache_hit_rate",
]


def test_fixtures_hold_exactly_the_releases_fields() -> None:
    for line in SERVING.read_text().splitlines():
        assert list(json.loads(line)) == SERVING_FIELDS
    for line in ONE_BATCH.read_text().splitlines():
        assert list(json.loads(line)) == ONE_BATCH_FIELDS


def test_bench_serving_lines_parse_with_server_info_as_configuration() -> None:
    bench = read_bench(SERVING)

    assert bench.shape is Shape.SERVING
    assert [(p.context, p.concurrency, p.throughput) for p in bench.points] == [
        (1024, 1, 303.4),
        (1024, 128, 4723.0),
    ]
    first = bench.points[0]
    assert first.accept_length == 4.36 and first.accept_note == SERVING_ACCEPT_NOTE
    assert first.metrics["median_ttft_ms"] == pytest.approx(86.8)
    assert first.metrics["p99_itl_ms"] == pytest.approx(22.5)
    assert first.metrics["request_throughput"] == 0.296
    assert bench.config["speculative_algorithm"] == "DDTREE"
    assert bench.config["speculative_num_draft_tokens"] == 8
    assert bench.config["enable_nccl_nvls"] is True
    assert bench.config["version"] == "0.5.23"
    assert bench.config_source == "file" and not bench.autoregressive


def test_bench_one_batch_server_records_parse_and_minus_one_means_no_accept_length() -> None:
    bench = read_bench(ONE_BATCH)

    assert bench.shape is Shape.ONE_BATCH
    assert [(p.context, p.concurrency, p.throughput, p.accept_length) for p in bench.points] == [
        (1024, 1, 303.1, 4.36),
        (1024, 16, 1562.4, 4.41),
        (4096, 1, 280.0, None),
    ]
    assert bench.points[0].metrics["latency"] == 1.2567
    assert bench.points[0].accept_note == ""  # one_batch_server flushes the cache per case


def test_campaign_speedup_is_the_exact_ratio_not_a_rounded_guess() -> None:
    files = [read_bench(p) for p in (AR, B8, CRASHED)]
    baseline = choose_baseline(files)

    assert baseline is not None and baseline.label == "B300_ar"
    rows = {(r.file.label, r.point.cell): r for r in speedup_table(files, baseline)}
    c1 = rows[("B300_nvlsb8t4", (1024, 1))]
    assert c1.speedup == 303 / 133
    assert speedup_text(c1.speedup) == "2.28×"
    assert speedup_text(rows[("B300_nvlsb8t4", (1024, 128))].speedup) == "1.63×"


def test_the_122_byte_file_is_a_crashed_run_with_the_setup_it_was_started_with() -> None:
    assert CRASHED.stat().st_size == 122
    bench = read_bench(CRASHED)

    assert bench.crashed and bench.points == ()
    assert "cut short" in bench.detail
    assert bench.config["budget"] == 12 and bench.config["topk"] == 6
    assert bench.config["cuda_graph"] is True


@pytest.mark.parametrize(
    "text",
    [
        "",
        "{}",
        '{"budget": 12, "results": {}}',
        '{"output_throughput": null}',
        "\x00\x00garbage",
        '{"request_throughput": 1.0, "output_throughput": null}',
    ],
)
def test_nothing_measured_is_a_crashed_run_never_an_error(text: str) -> None:
    assert parse_bench("x.json", text.encode()).crashed


@pytest.mark.parametrize(
    "doc",
    [
        {"1024": {"1": 303.0, "128": 4723.0}},
        {
            "results": [
                {"context": 1024, "concurrency": 1, "output_throughput": 303.0},
                {"context": 1024, "concurrency": 128, "output_throughput": 4723.0},
            ]
        },
        {"ctx=1k": {"C=1": {"tok_s": 303.0}, "C=128": {"tok_s": 4723.0}}},
        {"throughput": {"ctx_1024": {"c1": 303.0, "c128": 4723.0}}},
        {"context_len": 1024, "concurrency": [1, 128], "throughput": [303.0, 4723.0]},
        {
            "by_concurrency": {
                "1": {"input_len": 1024, "output_throughput": 303.0},
                "128": {"input_len": 1024, "output_throughput": 4723.0},
            }
        },
        [
            {"isl": 1024, "max_concurrency": 1, "throughput": 303.0},
            {"isl": 1024, "max_concurrency": 128, "throughput": 4723.0},
        ],
    ],
)
def test_matrix_shapes_all_read_as_the_same_cells(doc: object) -> None:
    bench = parse_bench("B300_x.json", json.dumps(doc).encode())

    assert bench.shape is Shape.MATRIX
    assert [(p.context, p.concurrency, p.throughput) for p in bench.points] == [
        (1024, 1, 303.0),
        (1024, 128, 4723.0),
    ]


def test_matrix_accept_length_beside_throughput_and_latency_ignored() -> None:
    doc = {
        "throughput": {"1024": {"1": 303.0}},
        "accept_length": {"1024": {"1": 4.36}},
        "latency_ms": {"1024": {"1": 3300.0}},
    }
    (point,) = parse_bench("m.json", json.dumps(doc).encode()).points

    assert (point.throughput, point.accept_length) == (303.0, 4.36)


def test_a_jsonl_cut_mid_line_keeps_the_complete_lines() -> None:
    lines = SERVING.read_bytes().splitlines(keepends=True)
    bench = parse_bench("cut.jsonl", lines[0] + lines[1][:200])

    assert bench.shape is Shape.SERVING and len(bench.points) == 1


def test_baseline_by_name_and_unknown_name() -> None:
    files = [read_bench(p) for p in (AR, B8, SERVING)]

    chosen = choose_baseline(files, "B300_nvlsb8t4")
    assert chosen is not None and chosen.label == "B300_nvlsb8t4"
    with pytest.raises(ValueError, match="matches no bench file"):
        choose_baseline(files, "nope")
    assert choose_baseline([read_bench(B8)]) is None


def test_cli_prints_matrix_speedup_crash_and_accept_label(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "160")
    assert main(["bench", str(FIXTURES)]) == 0

    printed = capsys.readouterr().out
    assert "speedup against B300_ar" in printed
    assert "303 tok/s  2.28×  acc 4.36" in printed
    assert "B300_b12t6: no results (crashed run)" in printed
    assert f"bench_serving's accept length: {SERVING_ACCEPT_NOTE}" in printed
    assert "█" in printed


def test_cli_json_and_csv(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", str(AR), str(B8), str(CRASHED), "--json"]) == 0
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["label"] for r in records] == ["B300_ar", "B300_nvlsb8t4", "B300_b12t6"]
    assert records[1]["points"][0]["speedup"] == 303 / 133
    assert records[2]["crashed"] and records[2]["points"] == []

    assert main(["bench", str(AR), str(B8), str(CRASHED), "--csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert rows[2]["speedup"] == "2.2782" and rows[2]["baseline"] == "B300_ar"
    assert rows[-1]["shape"] == "crashed" and rows[-1]["accept_note"] == "no results (crashed run)"


def test_cli_bad_path_and_bad_baseline_are_usage_errors(tmp_path: Path) -> None:
    assert main(["bench", str(tmp_path / "missing.json")]) == 2
    assert main(["bench", str(AR), "--baseline", "nope"]) == 2
    assert main(["bench", str(tmp_path)]) == 2  # a directory with no bench file


def test_a_hostile_bench_file_neither_stops_the_run_nor_reaches_the_terminal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The attack run (issue 30): a 100k-deep JSON file ended `bench` with a RecursionError for
    every file; ESC and OSC in a file's configuration were written to the terminal as is."""
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    assert parse_bench(str(deep), deep.read_bytes()).crashed
    hostile = tmp_path / "hostile.jsonl"
    serving = (FIXTURES / "sglang-0.5.23_bench_serving.jsonl").read_text()
    record = json.loads(serving.splitlines()[0])
    record["tag"] = "x\x1b]0;pwned\x07\x1b[2Jy"
    hostile.write_text(json.dumps(record) + "\n")
    assert main(["bench", str(deep), str(hostile)]) == 0
    printed = capsys.readouterr()
    assert "\x1b" not in printed.out + printed.err and "\x07" not in printed.out
    assert "tag=x\\x1b]0;pwned\\x1b[2Jy" in printed.out  # shown, spelled out (BEL: rich drops it)
