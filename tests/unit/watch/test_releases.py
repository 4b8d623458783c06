"""Every line of every SGLang release the console reads, from the per-release fixtures.

`tests/fixtures/sglang/<release>.jsonl` holds lines composed from the format strings of that
release's wheel (`source` names the file and line), with the header varied (DP/TP/EP/PP ranks,
Ray prefixes, colour, journald prefixes); `ddtree.jsonl` holds the public DDTree/DFlash branch
wordings. Each test id names the release and the kind of line.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from console.watch.journal import assemble
from console.watch.sglang import (
    DecodeBatch,
    DraftRunnerInit,
    GraphCapture,
    KVCacheAllocated,
    PrefillBatch,
    ServerReady,
    WeightLoad,
    deprecation_warning,
    parse_line,
)
from console.watch.signatures import crash_signature, record_signature
from tests.unit.watch.test_journal import entry

FIXTURES = Path(__file__).parents[2] / "fixtures" / "sglang"
RELEASES = sorted(p.stem for p in FIXTURES.glob("*.jsonl"))


def _rows() -> list[Any]:
    rows = []
    for release in RELEASES:
        lines = (FIXTURES / f"{release}.jsonl").read_text().splitlines()
        for n, text in enumerate(lines):
            row = json.loads(text)
            assert row["release"] == release
            rows.append(pytest.param(row, id=f"{release}-{row['kind']}-{n}"))
    return rows


ROWS = _rows()


def _of_kind(*kinds: str) -> list[Any]:
    return [p for p in ROWS if p.values[0]["kind"] in kinds]


def test_every_release_from_0_3_6_to_0_5_23_has_fixtures() -> None:
    assert {"0.3.6", "0.4.10", "0.5.3", "0.5.10", "0.5.16", "0.5.23", "ddtree"} <= set(RELEASES)
    for release in RELEASES:
        kinds = {p.values[0]["kind"] for p in ROWS if p.values[0]["release"] == release}
        assert {"decode", "ready"} <= kinds or release == "ddtree", release


@pytest.mark.parametrize("row", _of_kind("decode"))
def test_decode_lines_give_accept_length_and_throughput(row: dict[str, Any]) -> None:
    parsed = parse_line(row["line"])
    assert isinstance(parsed, DecodeBatch), row["source"]
    for name, value in row["expect"].items():
        assert getattr(parsed, name) == value, (name, row["source"])
    assert crash_signature(row["line"]) is None


@pytest.mark.parametrize("row", _of_kind("prefill"))
def test_prefill_lines_parse_with_whatever_fields_they_print(row: dict[str, Any]) -> None:
    parsed = parse_line(row["line"])
    assert isinstance(parsed, PrefillBatch), row["source"]
    for name, value in row["expect"].items():
        assert getattr(parsed, name) == value, (name, row["source"])


@pytest.mark.parametrize("row", _of_kind("init"))
def test_init_lines_name_the_algorithm_and_its_parameters(row: dict[str, Any]) -> None:
    parsed = parse_line(row["line"])
    assert isinstance(parsed, DraftRunnerInit), row["source"]
    assert parsed.algorithm == row["expect"]["algorithm"]
    assert parsed.variant == row["expect"].get("variant")
    for key, value in row["expect"]["params"].items():
        assert parsed.params[key] == value, key


@pytest.mark.parametrize("row", _of_kind("capture"))
def test_capture_lines_name_role_stage_and_device(row: dict[str, Any]) -> None:
    parsed = parse_line(row["line"])
    assert isinstance(parsed, GraphCapture), row["source"]
    for name, value in row["expect"].items():
        assert getattr(parsed, name) == value, (name, row["source"])


@pytest.mark.parametrize("row", _of_kind("load", "kv", "ready"))
def test_load_kv_and_ready_lines(row: dict[str, Any]) -> None:
    parsed = parse_line(row["line"])
    kind = {"load": WeightLoad, "kv": KVCacheAllocated, "ready": ServerReady}[row["kind"]]
    assert parsed is not None and isinstance(parsed, kind), row["source"]
    for name, value in row["expect"].items():
        assert getattr(parsed, name) == value, (name, row["source"])
    assert parsed.header is not None and parsed.header.timestamp.startswith("2026-01-02")


@pytest.mark.parametrize("row", _of_kind("watchdog", "sigquit", "health_check", "crash"))
def test_every_crash_wording_has_its_signature(row: dict[str, Any]) -> None:
    lines = row["line"].split("\n")
    assert record_signature(lines) == row["expect"]["signature"], row["source"]
    assert parse_line(lines[0]) is None


@pytest.mark.parametrize(
    "row", [p for p in _of_kind("watchdog") if p.values[0]["expect"]["signature"] is not None]
)
def test_a_traceback_headed_by_the_watchdog_is_a_watchdog_timeout(row: dict[str, Any]) -> None:
    """The hang's record goes on with py-spy stacks and the SIGQUIT it triggers."""
    header = row["line"][: row["line"].index("atchdog") - 1].rsplit("]", 1)[0] + "]"
    entries = [
        entry(message, n + 1)
        for n, message in enumerate(
            [
                row["line"],
                "Thread 0x7f00 (most recent call first):",
                '  File "/sglang/srt/managers/scheduler.py", line 900 in event_loop_overlap',
                "SIGQUIT received. signum=3, frame=None. It usually means one child failed.",
                f"{header} Decode batch, #running-req: 1, gen throughput (token/s): 1.00",
            ]
        )
    ]
    records = assemble(entries)
    assert records[0].crash == "watchdog_timeout", row["release"]
    assert crash_signature(entries[3].message) == "sigquit"


@pytest.mark.parametrize("row", _of_kind("deprecation"))
def test_deprecation_warnings_are_read_without_colour(row: dict[str, Any]) -> None:
    assert deprecation_warning(row["line"]) == row["expect"]["warning"], row["source"]
    assert parse_line(row["line"]) is None and crash_signature(row["line"]) is None
