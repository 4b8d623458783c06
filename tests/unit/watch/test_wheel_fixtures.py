"""The parser and signatures over the second, larger fixture set built from the wheels.

`tests/fixtures/sglang/wheels/<release>.jsonl` (518 lines over 0.3.6–0.5.23 and the DDTree
branch) were composed by a separate reading of the unzipped wheels: every `source` names the
format string's file:line in that release, `record` holds multi-line records as journald
stores them, `expect_header` the ranks. Where that reading and specops name a line
differently on purpose, `DIFFERENT` says why; every other expectation must hold.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from console.watch.batches import token_usage_of
from console.watch.sglang import (
    DecodeBatch,
    DraftRunnerInit,
    GraphCapture,
    KVCacheAllocated,
    PrefillBatch,
    ServerArgsLine,
    ServerReady,
    WeightLoad,
    deprecation_warning,
    parse_header,
    parse_line,
)
from console.watch.signatures import record_signature

WHEELS = Path(__file__).parents[2] / "fixtures" / "sglang" / "wheels"

# (kind, substring of the line) -> why specops reads it differently.
DIFFERENT = {
    ("watchdog", "self.soft=True"): "a soft watchdog dumps stacks and the server goes on: no crash",
    ("decode", "#gpu token"): "hisparse: `#gpu token` is the pool the console charts as #token",
    ("draft_init", "draft runner ready"): "the readiness line after init, not the init line",
}
DECODE = {
    "running_req": "running_req",
    "queue_req": "queue_req",
    "gen_throughput": "gen_throughput",
    "accept_len": "accept_len",
    "accept_rate": "accept_rate",
    "graph": "graph",
    "graph_backend": "graph_backend",
    "token": "token",
    "token_usage": "token_usage",
    "forward_iter": "iteration",
}
PREFILL = {
    "new_seq": "new_seq",
    "new_token": "new_token",
    "cached_token": "cached_token",
    "running_req": "running_req",
    "queue_req": "queue_req",
    "input_throughput": "input_throughput",
    "graph": "graph",
    "token_usage": "token_usage",
    "forward_iter": "iteration",
}
TYPES: dict[str, type] = {
    "weight_load": WeightLoad,
    "kv_cache": KVCacheAllocated,
    "ready": ServerReady,
    "server_args": ServerArgsLine,
    "draft_init": DraftRunnerInit,
    "capture": GraphCapture,
}


def _rows() -> list[Any]:
    rows = []
    for path in sorted(WHEELS.glob("*.jsonl")):
        for n, text in enumerate(path.read_text().splitlines()):
            row = json.loads(text)
            why = next(
                (w for (k, s), w in DIFFERENT.items() if k == row["kind"] and s in row["line"]),
                None,
            )
            marks = [pytest.mark.xfail(reason=why, strict=True)] if why else []
            rows.append(pytest.param(row, id=f"{row['release']}-{row['kind']}-{n}", marks=marks))
    return rows


ROWS = _rows()


def test_the_wheel_fixtures_cover_every_release() -> None:
    releases = {p.values[0]["release"] for p in ROWS}
    assert {"0.3.6", "0.4.1", "0.4.6", "0.4.10", "0.5.3", "0.5.4", "0.5.5", "0.5.6"} <= releases
    assert {"0.5.10", "0.5.16", "0.5.23"} <= releases and len(ROWS) > 500


@pytest.mark.parametrize("row", ROWS)
def test_every_wheel_fixture_line(row: dict[str, Any]) -> None:
    kind, line, expect = row["kind"], row["line"], row["expect"]
    parsed = parse_line(line)
    fields = {"decode": (DecodeBatch, DECODE), "prefill": (PrefillBatch, PREFILL)}.get(kind)
    if fields is not None:
        cls, names = fields
        assert isinstance(parsed, cls), row["source"]
        for theirs, ours in names.items():
            if theirs in expect:
                assert getattr(parsed, ours) == expect[theirs], (theirs, row["source"])
    elif kind in TYPES:
        assert isinstance(parsed, TYPES[kind]), row["source"]
        if kind == "capture":
            for name in ("phase", "role", "stage"):
                if name in expect:
                    assert getattr(parsed, name) == expect[name], (name, row["source"])
        if kind == "draft_init" and isinstance(parsed, DraftRunnerInit):
            assert parsed.algorithm == expect["algorithm"].upper()
    elif kind == "deprecation_warning":
        assert deprecation_warning(line) is not None
    if "signature" in expect:
        record = row.get("record") or [line]
        # `Subprocess … crashed with exit code`: specops names it by its own signature.
        wanted = expect.get("sub_signature") or expect["signature"]
        assert record_signature(record) == wanted, row["source"]
    header = row.get("expect_header")
    if header is not None:
        found = parse_header(line)
        assert found is not None and found.label == header["prefix"], row["source"]


def test_the_kv_share_of_the_newest_decode_line_matches_the_parsers_in_every_release() -> None:
    """`token_usage_of` (read from a slice's newest decode line, beside the columns the flood
    is read into) says what the full parser says, on every wheel-built decode line: `token
    usage`, SWA's `full token usage` before its `swa token usage`."""
    decodes = [p.values[0]["line"] for p in ROWS if p.values[0]["kind"] == "decode"]
    assert len(decodes) > 30
    seen = set()
    for line in decodes:
        parsed = parse_line(line)
        assert isinstance(parsed, DecodeBatch)
        assert token_usage_of(line) == parsed.token_usage, line
        seen.add(parsed.token_usage is None)
    assert seen == {False}  # every release's decode line says it
    assert token_usage_of("Decode batch. #running-req: 1, accept len: 2.00, ") is None
