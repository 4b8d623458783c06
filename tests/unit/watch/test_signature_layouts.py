"""The crash gate's memory of clean line layouts: same answers as the table, bounded."""

from __future__ import annotations

import re
from typing import Any

import pytest

from console.watch import signatures
from console.watch.signatures import CRASH_SIGNATURES, crash_signature
from tests.unit.watch.test_releases import ROWS

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")


def _by_the_table(message: str) -> str | None:
    message = _ANSI.sub("", message)
    return next((name for name, p in CRASH_SIGNATURES if p.search(message) is not None), None)


def test_no_needle_holds_a_digit() -> None:
    """What makes a line's layout (its digits taken out) stand for the line."""
    for needle in signatures._CRASH_NEEDLES:
        assert not any(chr(b).isdigit() for b in needle), needle


@pytest.mark.parametrize("row", ROWS)
def test_every_fixture_line_reads_as_the_table_says_first_and_again(row: dict[str, Any]) -> None:
    line = row["line"]
    assert crash_signature(line) == _by_the_table(line), row["source"]
    assert crash_signature(line) == _by_the_table(line), row["source"]  # layout remembered


def test_a_crash_with_a_known_layouts_numbers_is_still_a_crash() -> None:
    signatures._clean.clear()
    flood = "[2026-01-02 03:04:{:02d} TP{}] Decode batch, #running-req: {}, accept len: 4.{}"
    for i in range(50):
        assert crash_signature(flood.format(i % 60, i % 8, i, i)) is None
    assert len(signatures._clean) == 1  # one layout for the whole flood
    crash = "[2026-01-02 03:04:05 TP3] CUDA error: an illegal memory access was encountered"
    assert crash_signature(crash) == "illegal_memory_access"
    assert crash_signature("Fatal Python error: Segmentation fault 11") == "segfault"
    assert crash_signature("é Received SIGQUIT from scheduler 7") == "sigquit"


def test_the_layout_memory_is_bounded() -> None:
    signatures._clean.clear()
    for i in range(signatures.CLEAN_KEPT * 3):
        crash_signature("line " + "x" * (i % 700) + "y" * (i // 700))
        assert len(signatures._clean) <= signatures.CLEAN_KEPT
    signatures._clean.clear()
    crash_signature("z" * (signatures.CLEAN_CHARS + 1))
    assert not signatures._clean  # too long to keep
    assert crash_signature("z" * (signatures.CLEAN_CHARS + 1)) is None
