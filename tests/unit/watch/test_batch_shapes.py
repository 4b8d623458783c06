"""The compiled shapes read every batch line exactly as the field-by-field reading does.

A shape is built from the first line of a layout and reads the lines after it with one
`fullmatch`: over every decode and prefill line of every release fixture, and over lines made
to sit on the edges of what a shape admits, the second reading of a line (through its shape)
must equal the first (field by field), and a line that only looks like a known layout must
still be read field by field.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from console.watch import batches
from console.watch.batches import DecodeBatch, decode_numbers, parse_decode, parse_prefill

FIXTURES = Path(__file__).parents[2] / "fixtures" / "sglang"


def _batch_lines() -> list[str]:
    lines = []
    for path in sorted(FIXTURES.rglob("*.jsonl")):
        for raw in path.read_text().splitlines():
            case = json.loads(raw)
            line = case.get("record") or case.get("line") or ""
            if "Decode batch" in line or "Prefill batch" in line:
                lines.append(line)
    return lines


LINES = _batch_lines()


def _fresh_shapes() -> None:
    batches._read_decode_fields.__closure__[0].cell_contents.clear()  # type: ignore[index]
    batches._read_prefill_fields.__closure__[0].cell_contents.clear()  # type: ignore[index]


def test_fixtures_have_batch_lines_of_many_layouts() -> None:
    assert len(LINES) > 50


@pytest.mark.parametrize("line", LINES)
def test_a_line_read_through_its_shape_reads_the_same(line: str) -> None:
    _fresh_shapes()
    parse = parse_decode if "Decode batch" in line else parse_prefill
    first = parse(line)  # field by field; builds the shape
    assert parse(line) == first
    # The same layout with other numbers goes through the shape too.
    other = line.replace("0.", "1.").replace(": 1", ": 2")
    _fresh_shapes()
    expected = parse(other)
    parse(line)
    assert parse(other) == expected


EDGES = [
    "accept len: inf",
    "accept len: nan",
    "accept len: 1e400",
    "accept len: 1_000",
    "accept len:  4.2",
    "accept len: 4.2%%",
    "accept len: 4.2%x",
    "accept len: 4,2",
    "accept len: ",
    "cuda graph: maybe",
    "cuda graph: True, cuda graph: False",
    "accept len: 4.20, accept len: 5.00",
    "seq=1 t=2:3",
    "note, with comma",
    "accept len: 4.20,,  ",
    "accept len: 4.20 ,",
]


@pytest.mark.parametrize("edge", EDGES)
def test_lines_at_the_edges_of_a_shape_read_as_field_by_field(edge: str) -> None:
    base = "[2026-01-02 03:04:00 TP0] Decode batch, #running-req: 48, #token: 60123, "
    shaped = base + "accept len: 4.12, cuda graph: True, gen throughput (token/s): 99.00"
    odd = base + edge + ", gen throughput (token/s): 99.00"
    _fresh_shapes()
    expected = parse_decode(odd)
    for first in (shaped, odd):
        _fresh_shapes()
        parse_decode(first)  # a shape from this line is in place
        assert parse_decode(odd) == expected, (first, odd)
        assert decode_numbers(odd) == _numbers(expected), (first, odd)


def _numbers(batch: DecodeBatch | None) -> tuple[object, ...] | None:
    if batch is None:
        return None
    return (
        batch.gen_throughput,
        batch.running_req,
        batch.queue_req,
        batch.accept_len,
        batch.accept_rate,
        batch.graph_backend,
        batch.graph,
    )


@pytest.mark.parametrize("line", [line for line in LINES if "Decode batch" in line])
def test_the_monitors_decode_numbers_are_the_decode_batchs(line: str) -> None:
    """`decode_numbers` (the live monitor's path) reads what `parse_decode` reads."""
    _fresh_shapes()
    for _ in range(2):  # field by field, then through the shape
        assert decode_numbers(line) == _numbers(parse_decode(line))


@pytest.mark.parametrize("token", ["inf", "nan", "1e400", "x", "", "1_0"])
def test_a_bad_uncharted_number_in_a_known_shape_keeps_the_charted_ones(token: str) -> None:
    """`decode_numbers` reads only the five charted groups of a shaped line: a field it does
    not chart that is no finite number changes nothing, as in the field-by-field reading."""
    line = (
        "[2026-01-02 03:04:00 TP0] Decode batch, #running-req: 48, #token: {}, "
        "token usage: 0.50, accept len: 4.12, accept rate: 0.41, cuda graph: True, "
        "gen throughput (token/s): 99.00, #queue-req: 3"
    )
    _fresh_shapes()
    decode_numbers(line.format(60123))  # the shape is in place
    odd = line.format(token)
    assert (
        decode_numbers(odd)
        == _numbers(parse_decode(odd))
        == (99.0, 48, 3, 4.12, 0.41, "cuda", True)
    )


DECODE_LINES = [line for line in LINES if "Decode batch" in line]


def _slice(line: str, count: int = 12) -> list[str]:
    """`count` lines of the layout of `line`, with other numbers in each."""
    return [line.replace(": 1", f": {i + 1}").replace("0.", f"{i % 9}.") for i in range(count)]


@pytest.mark.parametrize("line", DECODE_LINES)
def test_a_slice_of_decode_lines_reads_as_each_line_alone(line: str) -> None:
    """`decode_numbers_of` (one search over a slice's lines joined) reads what
    `decode_numbers` reads of each line, for every release's layout."""
    lines = _slice(line)
    _fresh_shapes()
    expected = [decode_numbers(one) for one in lines]
    for _ in range(2):  # before and after the layout's shape is known
        _fresh_shapes()
        decode_numbers(line)
        assert list(batches.decode_numbers_of(lines)) == expected


SLICE_ODDITIES = [
    *(f"[2026-01-02 03:04:00 TP0] Decode batch, #running-req: 48, {edge}" for edge in EDGES),
    "[2026-01-02 03:04:00 TP0] Decode batch, #running-req: 48, note: Decode batch, x: 1",
    "prefix Decode batch. #running-req: 1, accept len: 2.00, and Decode batch, #queue-req: 3",
    "[2026-01-02 03:04:00 TP0] Decode batch [7], #running-req: 48, #token: 6",
    "[2026-01-02 03:04:00 TP0] Decode batch []. #running-req: 48, #token: 6",
    "[2026-01-02 03:04:00 TP0] Decode batch, #running-req: 48\nTraceback: 1, x: 2",
    "Decode batch, #running-req: inf, #queue-req: 1, accept len: 4.00, accept rate: 0.4, "
    "cuda graph: False, gen throughput (token/s): 10.00",
]


@pytest.mark.parametrize("odd", SLICE_ODDITIES)
def test_an_odd_line_among_a_slice_reads_as_it_would_alone(odd: str) -> None:
    """A line that does not fit the slice's shape (another layout, a bad or infinite
    number, the name twice, a continuation line) leaves every line read as it is alone."""
    shaped = (
        "[2026-01-02 03:04:00 TP0] Decode batch, #running-req: 48, #token: 60123, "
        "token usage: 0.50, accept len: 4.12, accept rate: 0.41, cuda graph: True, "
        "gen throughput (token/s): 99.00, #queue-req: 3"
    )
    for at in (0, 5, 11):
        lines = _slice(shaped)
        lines[at] = odd
        _fresh_shapes()
        expected = [decode_numbers(one) for one in lines]
        _fresh_shapes()
        decode_numbers(shaped)
        assert list(batches.decode_numbers_of(lines)) == expected, at
