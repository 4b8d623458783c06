"""The JSON objects of a file too large to decode whole, each without its huge members.

`sglang.bench_serving --output-details` writes every request's generated text, TTFT and
inter-token latencies into the run's one JSON line: a valid result can be hundreds of MiB
while what a finding needs (throughput, concurrency, `/server_info`) is a few hundred bytes at
its top level. This reads such a file where it lies (bytes or an `mmap`), object by object,
and decodes only the members smaller than `SMALL`; larger ones are stepped over by regular
expressions (no recursion, so no nesting depth is too deep, and no huge value is built).

Pure: no I/O of its own; no Textual.
"""

from __future__ import annotations

import json
import mmap
import re
from dataclasses import dataclass, field
from typing import Any, TypeAlias

SMALL = 1 << 20
"""A member whose value's text is longer than this is left out of its object."""

_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_PLAIN = re.compile(rb'[^"\[\]{}]+')
_SCALAR = re.compile(rb"[^,}\]\s]+")
_SPACE = re.compile(rb"\s*")

Buffer: TypeAlias = bytes | mmap.mmap
"""What is read: bytes, or a file mapped in place (searched and sliced the same way)."""


@dataclass
class Objects:
    """What a file held: its top-level objects (huge members left out) and where reading
    stopped early, if it did."""

    records: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    """`generated_texts (212.4 MiB)`: members left out, with their size."""
    problem: str = ""
    partial: dict[str, Any] = field(default_factory=dict)
    """The members read of an object the data ends inside (a run killed mid-write)."""


def read_objects(data: Buffer) -> Objects:
    """Every top-level JSON object in `data` (one document or JSON lines), in order."""
    found = Objects()
    pos, size = 0, len(data)
    while True:
        pos = _space(data, pos)
        if pos >= size:
            return found
        if data[pos : pos + 1] != b"{":
            found.problem = f"not a JSON object at byte {pos}"
            return found
        record, end = _object(data, pos, found.skipped)
        if end is None:
            found.problem = f"cut short in the object at byte {pos}"
            found.partial = record
            return found
        found.records.append(record)
        pos = end


def _space(data: Buffer, pos: int) -> int:
    match = _SPACE.match(data, pos)
    return match.end() if match else pos


def _object(data: Buffer, pos: int, skipped: list[str]) -> tuple[dict[str, Any], int | None]:
    """The object at `pos` (a `{`) and the position after it; None when it is cut short."""
    members: dict[str, Any] = {}
    pos = _space(data, pos + 1)
    if data[pos : pos + 1] == b"}":
        return members, pos + 1
    while True:
        key = _STRING.match(data, pos)
        if key is None:
            return members, None
        name = json.loads(key.group())
        pos = _space(data, key.end())
        if data[pos : pos + 1] != b":":
            return members, None
        start = _space(data, pos + 1)
        end = value_end(data, start)
        if end is None:
            return members, None
        if end - start <= SMALL:
            try:
                members[name] = json.loads(bytes(data[start:end]))
            except (ValueError, RecursionError):
                skipped.append(f"{name} (not readable JSON)")
        else:
            skipped.append(f"{name} ({(end - start) / (1 << 20):.1f} MiB)")
        pos = _space(data, end)
        separator = data[pos : pos + 1]
        if separator == b"}":
            return members, pos + 1
        if separator != b",":
            return members, None
        pos = _space(data, pos + 1)


def value_end(data: Buffer, pos: int) -> int | None:
    """Where the JSON value starting at `pos` ends; None when the data ends first."""
    first = data[pos : pos + 1]
    if first == b'"':
        string = _STRING.match(data, pos)
        return string.end() if string else None
    if first not in (b"[", b"{"):
        scalar = _SCALAR.match(data, pos)
        return scalar.end() if scalar else None
    depth = 0
    while True:
        char = data[pos : pos + 1]
        if not char:
            return None
        if char == b'"':
            string = _STRING.match(data, pos)
            if string is None:
                return None
            pos = string.end()
        elif char in (b"[", b"{"):
            depth, pos = depth + 1, pos + 1
        elif char in (b"]", b"}"):
            depth, pos = depth - 1, pos + 1
            if depth == 0:
                return pos
        else:
            plain = _PLAIN.match(data, pos)
            assert plain is not None  # char is none of the characters _PLAIN stops at
            pos = plain.end()
