"""Benchmark result files, read by their content: whatever wrote them, one list of points.

A tuning campaign leaves three kinds of file behind, under names that say little:

- `sglang.bench_serving` (`python -m sglang.benchmark.serving`) appends one JSON object per run
  to a `.jsonl` file: `request_throughput`, `output_throughput`, `mean/median/p99_{ttft,tpot,
  itl}_ms`, `max_concurrency`, `accept_length` and the whole `/server_info` (the server's
  resolved arguments: the configuration it was measured with);
- `sglang.bench_one_batch_server` appends one record per case: `batch_size`, `input_len`,
  `output_len`, `latency`, `output_throughput`, `acc_length` (-1 when the server gave none);
- hand-rolled sweeps, like that campaign's `B300_<variant>.json`: throughput by context length
  × concurrency, nested dicts or lists keyed any which way (console/findings/bench_matrix.py
  reads those).

Each becomes a `BenchFile` of `Point`s (context length, concurrency, output throughput, accept
length, other numbers). A file that is empty, cut short or holds no measurement is a crashed
run ("no results (crashed run)"), never an error: the 122-byte file a crashed sweep leaves is
evidence too. `bench_serving`'s `accept_length` is the server's average since it started or
since the last `/flush_cache`, not this run's; its points say so.

Pure: reads the files it is given, nothing else; no Textual.
"""

from __future__ import annotations

import dataclasses
import json
import math
import mmap
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from console.findings.bench_matrix import (
    ConfigValue,
    Point,
    config_of,
    is_scalar,
    matrix_points,
    salvage_config,
)
from console.findings.json_members import read_objects

__all__ = [
    "SERVING_ACCEPT_NOTE",
    "BenchFile",
    "Point",
    "Row",
    "Shape",
    "choose_baseline",
    "parse_bench",
    "read_bench",
    "speedup_table",
]

SERVING_ACCEPT_NOTE = "since server start or last /flush_cache"
"""What `bench_serving`'s `accept_length` averages over: `/server_info`'s running average."""

MAX_BYTES = 64 << 20
"""A bench file larger than this is not decoded whole (a `--output-details` dump can be
hundreds of MiB): read_bench steps over its huge members instead."""

SERVING_MARKERS = ("request_throughput", "median_ttft_ms", "mean_itl_ms", "mean_tpot_ms")
ONE_BATCH_MARKERS = ("batch_size", "input_len", "output_len", "latency")
SERVING_METRICS = (
    "request_throughput",
    "input_throughput",
    "total_throughput",
    "mean_ttft_ms",
    "median_ttft_ms",
    "p99_ttft_ms",
    "mean_tpot_ms",
    "median_tpot_ms",
    "p99_tpot_ms",
    "mean_itl_ms",
    "median_itl_ms",
    "p99_itl_ms",
    "mean_e2e_latency_ms",
    "completed",
    "duration",
)
ONE_BATCH_METRICS = (
    "latency",
    "input_throughput",
    "overall_throughput",
    "last_ttft",
    "last_gen_throughput",
    "steady_state_output_throughput",
)
SERVER_INFO_KEYS = (
    "version",
    "model_path",
    "tp_size",
    "speculative_algorithm",
    "speculative_num_steps",
    "speculative_eagle_topk",
    "speculative_num_draft_tokens",
    "disable_cuda_graph",
    "enable_nccl_nvls",
    "max_running_requests",
)
"""The `/server_info` fields (SGLang 0.5.23's resolved server arguments) that name a setup."""
AUTOREGRESSIVE_WORDS = frozenset(("ar", "autoregressive", "baseline", "nospec", "no_spec"))


class Shape(StrEnum):
    SERVING = "bench_serving"
    ONE_BATCH = "bench_one_batch_server"
    MATRIX = "matrix"
    CRASHED = "crashed"


@dataclass(frozen=True)
class BenchFile:
    """One bench file as read: its shape, its points, and what it was measured with."""

    path: str
    label: str
    """The file's stem: what `--baseline NAME` matches and what tables call it."""
    shape: Shape
    points: tuple[Point, ...] = ()
    config: Mapping[str, ConfigValue] = field(default_factory=dict)
    config_source: str = ""
    """"file" when the configuration came from the file itself; else who supplied it."""
    detail: str = ""
    """Why a crashed run counts as one (truncated JSON, no measurement)."""
    size: int = 0

    @property
    def crashed(self) -> bool:
        return self.shape is Shape.CRASHED

    @property
    def autoregressive(self) -> bool:
        """True when the file is the no-speculation baseline, by its configuration or name."""
        if "speculative_algorithm" in self.config:
            algo = self.config["speculative_algorithm"]
            return algo is None or str(algo).lower() in ("", "none", "null", "false")
        for key in ("speculative", "spec", "speculation"):
            if key in self.config and self.config[key] in (False, "off", "none", 0):
                return True
        words = self.label.lower().replace("-", "_").replace(".", "_").split("_")
        return bool(AUTOREGRESSIVE_WORDS.intersection(words))

    def with_config(self, config: Mapping[str, ConfigValue], source: str) -> BenchFile:
        """The same file with a configuration supplied from outside it (a snapshot's flags)."""
        return BenchFile(
            self.path,
            self.label,
            self.shape,
            self.points,
            dict(config),
            source,
            self.detail,
            self.size,
        )


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _int(value: Any) -> int | None:
    number = _number(value)
    return int(number) if number is not None and number == int(number) else None


def _records(text: str) -> tuple[list[Any], str]:
    """The JSON values in `text` (one document, or JSON lines), and why reading stopped early."""
    stripped = text.strip()
    if not stripped:
        return [], "empty file"
    try:
        return [json.loads(stripped)], ""
    except RecursionError:
        return [], "nested too deep to be a bench result"
    except ValueError:
        pass  # not one JSON document: read it as JSON lines below
    found: list[Any] = []
    for lineno, line in enumerate(stripped.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            found.append(json.loads(line))
        except json.JSONDecodeError as exc:
            # A run killed mid-write leaves its last line cut; the lines before it stand.
            return found, f"not JSON at line {lineno} (cut short?): {exc.msg}"
        except ValueError as exc:  # e.g. a number too long to convert
            return found, f"not JSON at line {lineno}: {exc}"
        except RecursionError:
            return found, f"line {lineno} is nested too deep to be a bench result"
    return found, ""


def _serving_point(record: Mapping[str, Any]) -> Point:
    context = _int(record.get("random_input_len")) if _is_random(record) else None
    accept = _number(record.get("accept_length"))
    return Point(
        context=context,
        concurrency=_int(record.get("max_concurrency")),
        throughput=_number(record.get("output_throughput")),
        accept_length=accept,
        accept_note=SERVING_ACCEPT_NOTE if accept is not None else "",
        metrics={k: v for k in SERVING_METRICS if (v := _number(record.get(k))) is not None},
    )


def _is_random(record: Mapping[str, Any]) -> bool:
    return str(record.get("dataset_name", "")).startswith("random")


def _one_batch_point(record: Mapping[str, Any]) -> Point:
    accept = _number(record.get("acc_length"))
    return Point(
        context=_int(record.get("input_len")),
        concurrency=_int(record.get("batch_size")),
        throughput=_number(record.get("output_throughput")),
        accept_length=accept if accept is not None and accept > 0 else None,
        metrics={k: v for k in ONE_BATCH_METRICS if (v := _number(record.get(k))) is not None},
    )


def _serving_config(record: Mapping[str, Any]) -> dict[str, ConfigValue]:
    config: dict[str, ConfigValue] = {}
    info = record.get("server_info")
    if isinstance(info, Mapping):
        if isinstance(info.get("decode"), list) and info["decode"]:
            info = info["decode"][0]  # a disaggregated server reports its decode side
        for key in SERVER_INFO_KEYS:
            if key in info and is_scalar(info[key]):
                config[key] = info[key]
    for key in ("backend", "dataset_name", "tag"):
        if is_scalar(record.get(key)) and record.get(key) is not None:
            config[key] = record[key]
    return config


def _has(record: Any, markers: Sequence[str], need: int) -> bool:
    return isinstance(record, Mapping) and sum(k in record for k in markers) >= need


def parse_bench(path: str, data: bytes) -> BenchFile:
    """Read one bench file's bytes; never raises for what the file holds."""
    if len(data) > MAX_BYTES:
        return _parse_large(path, data, len(data))
    text = data.decode("utf-8", "replace")
    records, problem = _records(text)
    found = _classify(path, records, problem, len(data))
    if not found.crashed or records or not text.lstrip().startswith("{"):
        return found
    config = salvage_config(text)
    source = "file (what was written before it was cut off)" if config else ""
    return dataclasses.replace(found, config=config, config_source=source)


def _classify(path: str, records: Sequence[Any], problem: str, size: int) -> BenchFile:
    label = Path(path).stem
    dicts = [r for r in records if isinstance(r, Mapping)]
    if dicts and all(_has(r, SERVING_MARKERS, 1) for r in dicts):
        points = tuple(_serving_point(r) for r in dicts)
        return _measured(path, label, Shape.SERVING, points, _serving_config(dicts[-1]), size)
    if dicts and all(_has(r, ONE_BATCH_MARKERS, 3) for r in dicts):
        points = tuple(_one_batch_point(r) for r in dicts)
        config: dict[str, ConfigValue] = {}
        if is_scalar(dicts[-1].get("run_name")) and dicts[-1].get("run_name"):
            config["run_name"] = dicts[-1]["run_name"]
        return _measured(path, label, Shape.ONE_BATCH, points, config, size)
    points = tuple(p for r in records for p in matrix_points(r))
    config = {}
    for record in records:
        config.update(config_of(record))
    if points:
        return _measured(path, label, Shape.MATRIX, points, config, size, problem)
    detail = problem or "no measurement in it"
    return BenchFile(path, label, Shape.CRASHED, (), config, "file" if config else "", detail, size)


def _measured(
    path: str,
    label: str,
    shape: Shape,
    points: tuple[Point, ...],
    config: Mapping[str, ConfigValue],
    size: int,
    detail: str = "",
) -> BenchFile:
    usable = tuple(p for p in points if p.throughput is not None)
    if not usable:
        return BenchFile(path, label, Shape.CRASHED, (), config, "file", "no throughput", size)
    return BenchFile(path, label, shape, usable, config, "file" if config else "", detail, size)


def read_bench(path: str | os.PathLike[str]) -> BenchFile:
    """Read and parse one bench file. OSError propagates.

    A file over `MAX_BYTES` (a `--output-details` run: every request's text and latencies) is
    read where it lies, object by object, without the members too large to matter
    (console/findings/json_members.py): its summary numbers count like a small file's."""
    name = os.fspath(path)
    with open(name, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size <= MAX_BYTES:
            return parse_bench(name, f.read(MAX_BYTES + 1))
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
            return _parse_large(name, mapped, size)


def _parse_large(path: str, data: bytes | mmap.mmap, size: int) -> BenchFile:
    found = read_objects(data)
    bench = _classify(path, found.records, found.problem, size)
    if bench.crashed and not found.records and found.partial:
        config = _serving_config(found.partial) or config_of(found.partial)
        source = "file (what was written before it was cut off)" if config else ""
        return dataclasses.replace(bench, config=config, config_source=source)
    return bench


def choose_baseline(files: Sequence[BenchFile], name: str | None = None) -> BenchFile | None:
    """The file speedups are measured against: `name` (a label or path), else the first
    autoregressive file with results, else none. ValueError when `name` matches nothing."""
    measured = [f for f in files if not f.crashed]
    if name is not None:
        for match in (
            [f for f in measured if f.label == name or f.path == name],
            [f for f in measured if name in f.path],
        ):
            if len(match) == 1:
                return match[0]
            if len(match) > 1:
                labels = ", ".join(f.path for f in match)
                raise ValueError(f"--baseline {name!r} matches several files: {labels}")
        raise ValueError(f"--baseline {name!r} matches no bench file with results")
    return next((f for f in measured if f.autoregressive), None)


@dataclass(frozen=True)
class Row:
    """One point of one file, with its speedup over the baseline's point in the same cell."""

    file: BenchFile
    point: Point
    baseline: Point | None
    speedup: float | None


def speedup_table(files: Iterable[BenchFile], baseline: BenchFile | None) -> list[Row]:
    """Every point of every measured file, each against the baseline's point in its cell.

    Cells match on (context, concurrency) exactly. Failing that, the baseline's only point
    at the same concurrency is used when the context length is unknown on one side (a
    serving run on a real dataset has none); otherwise the point has no speedup.
    """
    base_cells: dict[tuple[int | None, int | None], Point] = {}
    if baseline is not None:
        for p in baseline.points:
            base_cells.setdefault(p.cell, p)
    rows: list[Row] = []
    for bench in files:
        for point in bench.points:
            ref = base_cells.get(point.cell) or _loose_match(point, base_cells)
            speedup = None
            if ref is not None and ref.throughput and point.throughput is not None:
                speedup = point.throughput / ref.throughput
            rows.append(Row(bench, point, ref, speedup))
    return rows


def _loose_match(
    point: Point, cells: Mapping[tuple[int | None, int | None], Point]
) -> Point | None:
    candidates = [
        p
        for (context, concurrency), p in cells.items()
        if concurrency == point.concurrency and (context is None or point.context is None)
    ]
    return candidates[0] if len(candidates) == 1 else None
