"""A tolerant reader for hand-made benchmark sweeps: throughput by context length × concurrency.

Campaign scripts write these however the evening went: `{"1024": {"1": 303.2, "128": 4723}}`,
`{"results": [{"context": 1024, "concurrency": 1, "output_throughput": 303.2}]}`,
`{"ctx=4k": {"C=128": {"tok_s": 4723, "accept_length": 4.36}}}`, or columns
(`{"concurrency": [1, 128], "throughput": [303.2, 4723]}`). Rather than a schema, the reader
walks the JSON and takes:

- a *measurement* wherever a dict holds a throughput field (`output_throughput`, `throughput`,
  `tok_s`, …), or a number sits under a coordinate key inside a throughput-ish part of the tree;
- *coordinates* from field names (`context`, `input_len`, `isl`, …; `concurrency`,
  `max_concurrency`, `batch_size`, `C`, …) and from keys along the path (`"ctx=4k"`, `"c128"`,
  `"1024"`); bare numbers are placed by position (outer context, inner concurrency) or, alone,
  by size (a `k` suffix or 1024 and up is a context length);
- the *configuration* from top-level scalars and `config`/`server_args`-like dicts.

Pure: no I/O, no Textual.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

ConfigValue = str | int | float | bool | None

THROUGHPUT_KEYS = frozenset(
    (
        "output_throughput",
        "throughput",
        "output_tok_s",
        "output_tokens_per_s",
        "tok_s",
        "tok/s",
        "tokens_per_s",
        "tokens_per_second",
        "tps",
        "gen_throughput",
    )
)
ACCEPT_KEYS = frozenset(("accept_length", "acc_length", "accept_len", "avg_accept_length"))
CONTEXT_KEYS = frozenset(
    ("context", "context_len", "context_length", "ctx", "ctx_len", "input_len", "isl", "seq_len")
)
CONCURRENCY_KEYS = frozenset(
    ("concurrency", "max_concurrency", "c", "conc", "batch_size", "bs", "clients", "parallel")
)
CONFIG_DICTS = frozenset(
    ("config", "configuration", "server_args", "args", "settings", "flags", "server_info", "meta")
)
_METRIC_HINTS = ("_ms", "latency", "ttft", "itl", "tpot", "throughput", "duration")
_KEY = re.compile(r"^(?P<name>[a-z_/]*?)[\s_=:\-]*(?P<num>\d+)(?P<k>k?)$")
_CONTEXT_NAMES = frozenset(("ctx", "context", "isl", "input", "in", "len", "seq", "prompt"))
_CONCURRENCY_NAMES = frozenset(("c", "conc", "concurrency", "bs", "batch", "clients", "n"))

CONTEXT, CONCURRENCY = "context", "concurrency"


@dataclass(frozen=True)
class Point:
    """One measurement: output tokens/s at a context length and a concurrency."""

    context: int | None
    concurrency: int | None
    throughput: float | None
    """Output tokens per second."""
    accept_length: float | None = None
    accept_note: str = ""
    """What `accept_length` averages over, when it is not this measurement alone."""
    metrics: Mapping[str, float] = field(default_factory=dict)
    """Every other number of the record (TTFT, ITL, latency, …), by its field name."""

    @property
    def cell(self) -> tuple[int | None, int | None]:
        return (self.context, self.concurrency)


@dataclass(frozen=True)
class _Coord:
    axis: str | None
    value: int
    kilo: bool = False


@dataclass
class _Cell:
    throughput: float | None = None
    accept: float | None = None
    metrics: dict[str, float] = field(default_factory=dict)


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _coord_key(key: str) -> _Coord | None:
    match = _KEY.match(key.strip().lower())
    if match is None:
        return None
    name, kilo = match["name"].strip("_/"), bool(match["k"])
    value = int(match["num"]) * (1024 if kilo else 1)
    if not name:
        return _Coord(None, value, kilo)
    if name in _CONTEXT_NAMES or name in CONTEXT_KEYS:
        return _Coord(CONTEXT, value, kilo)
    if name in _CONCURRENCY_NAMES or name in CONCURRENCY_KEYS:
        return _Coord(CONCURRENCY, value, kilo)
    return None


def _place(path: tuple[_Coord, ...]) -> tuple[int | None, int | None]:
    """(context, concurrency) from the coordinates along a path, named ones first."""
    found: dict[str, int] = {}
    unnamed: list[_Coord] = []
    for coord in path:
        if coord.axis is None:
            unnamed.append(coord)
        else:
            found[coord.axis] = coord.value
    free = [a for a in (CONTEXT, CONCURRENCY) if a not in found]
    unnamed = unnamed[-len(free) :] if free else []
    if len(unnamed) == 2:
        found[CONTEXT], found[CONCURRENCY] = unnamed[0].value, unnamed[1].value
    elif len(unnamed) == 1:
        only = unnamed[0]
        if len(free) == 1:
            found[free[0]] = only.value
        else:
            found[CONTEXT if only.kilo or only.value >= 1024 else CONCURRENCY] = only.value
    return found.get(CONTEXT), found.get(CONCURRENCY)


def _metric_of(key: str, current: str) -> str:
    lowered = key.lower()
    if lowered in THROUGHPUT_KEYS:
        return "throughput"
    if lowered in ACCEPT_KEYS:
        return "accept"
    if any(h in lowered for h in _METRIC_HINTS):
        return "other"
    return current


class _Walker:
    def __init__(self) -> None:
        self.cells: dict[tuple[int | None, int | None], _Cell] = {}

    def cell(self, path: tuple[_Coord, ...], own: Mapping[str, Any] | None = None) -> _Cell:
        coords = list(path)
        for key, value in (own or {}).items():
            lowered, number = key.lower(), _number(value)
            if number is None or number != int(number):
                continue
            if lowered in CONTEXT_KEYS:
                coords.append(_Coord(CONTEXT, int(number)))
            elif lowered in CONCURRENCY_KEYS:
                coords.append(_Coord(CONCURRENCY, int(number)))
        return self.cells.setdefault(_place(tuple(coords)), _Cell())

    def walk(self, value: Any, path: tuple[_Coord, ...], metric: str) -> None:
        if isinstance(value, Mapping):
            self._dict(value, path, metric)
        elif isinstance(value, list):
            for item in value:
                if isinstance(item, Mapping | list):
                    self.walk(item, path, metric)
        else:
            number = _number(value)
            if number is not None and path:
                self._leaf(self.cell(path), metric, number)

    @staticmethod
    def _leaf(cell: _Cell, metric: str, number: float) -> None:
        if metric == "throughput" and cell.throughput is None:
            cell.throughput = number
        elif metric == "accept" and cell.accept is None:
            cell.accept = number

    def _dict(self, value: Mapping[str, Any], path: tuple[_Coord, ...], metric: str) -> None:
        keys = {str(k).lower(): k for k in value}
        tput_key = next((keys[k] for k in keys if k in THROUGHPUT_KEYS), None)
        if tput_key is not None and _number(value[tput_key]) is not None:
            self._record(value, path)
            return
        if self._columns(value, path):
            return
        for key, child in value.items():
            name = str(key)
            if name.lower() in CONFIG_DICTS:
                continue
            coord = _coord_key(name)
            if coord is not None:
                self.walk(child, (*path, coord), metric)
            elif isinstance(child, Mapping | list) or path:
                self.walk(child, path, _metric_of(name, metric))

    def _record(self, value: Mapping[str, Any], path: tuple[_Coord, ...]) -> None:
        cell = self.cell(path, value)
        for key, child in value.items():
            lowered, number = str(key).lower(), _number(child)
            if number is None:
                continue
            if lowered in THROUGHPUT_KEYS:
                cell.throughput = number if cell.throughput is None else cell.throughput
            elif lowered in ACCEPT_KEYS:
                cell.accept = number if number > 0 else None
            elif any(h in lowered for h in _METRIC_HINTS):
                cell.metrics[str(key)] = number

    def _columns(self, value: Mapping[str, Any], path: tuple[_Coord, ...]) -> bool:
        """`{"concurrency": [1, 128], "throughput": [303, 4723]}`: parallel lists."""
        lists = {str(k).lower(): v for k, v in value.items() if isinstance(v, list)}
        tput = next((v for k, v in lists.items() if k in THROUGHPUT_KEYS), None)
        if tput is None:
            return False
        axes = [
            (axis, v)
            for k, v in lists.items()
            for axis in [CONTEXT if k in CONTEXT_KEYS else CONCURRENCY]
            if (k in CONTEXT_KEYS or k in CONCURRENCY_KEYS) and len(v) == len(tput)
        ]
        if not axes:
            return False
        accept = next((v for k, v in lists.items() if k in ACCEPT_KEYS and len(v) == len(tput)), [])
        fixed = [
            _Coord(CONTEXT if k.lower() in CONTEXT_KEYS else CONCURRENCY, int(n))
            for k, v in value.items()
            if (k.lower() in CONTEXT_KEYS or k.lower() in CONCURRENCY_KEYS)
            and (n := _number(v)) is not None
        ]
        for i, item in enumerate(tput):
            coords = [_Coord(a, int(n)) for a, v in axes if (n := _number(v[i])) is not None]
            cell = self.cells.setdefault(_place((*path, *fixed, *coords)), _Cell())
            cell.throughput = _number(item)
            if i < len(accept):
                cell.accept = _number(accept[i])
        return True


def matrix_points(record: Any) -> Iterator[Point]:
    """Every measurement in one JSON value, in (context, concurrency) order."""
    walker = _Walker()
    walker.walk(record, (), "throughput")
    order = sorted(walker.cells, key=lambda c: (c[0] or 0, c[1] or 0))
    for context, concurrency in order:
        cell = walker.cells[(context, concurrency)]
        if cell.throughput is not None:
            yield Point(context, concurrency, cell.throughput, cell.accept, metrics=cell.metrics)


_SALVAGE = re.compile(
    r'"([A-Za-z_][\w.-]*)"\s*:\s*("(?:[^"\\]|\\.)*"|-?\d+(?:\.\d+)?|true|false|null)\s*[,}]'
)


def salvage_config(text: str) -> dict[str, ConfigValue]:
    """The `"key": scalar` pairs written before a run died mid-file, in file order.

    Only pairs before the first nested `{` or `[` after the opening brace: what a sweep writes
    first is its setup; the cut-off results that follow are not configuration.
    """
    head = text.lstrip()[1:]
    cut = min((i for i in (head.find("{"), head.find("[")) if i >= 0), default=len(head))
    config: dict[str, ConfigValue] = {}
    for match in _SALVAGE.finditer(head[: cut + 1]):
        key, raw = match.group(1), match.group(2)
        value: ConfigValue
        if raw.startswith('"'):
            value = json.loads(raw)
        elif raw in ("true", "false", "null"):
            value = {"true": True, "false": False, "null": None}[raw]
        else:
            value = float(raw) if "." in raw else int(raw)
        config.setdefault(key, value)
    return config


def is_scalar(value: Any) -> bool:
    """A JSON value a configuration can hold: a string, number, boolean or null."""
    return value is None or isinstance(value, str | int | float | bool)


def _measured_name(lowered: str) -> bool:
    return (
        lowered in THROUGHPUT_KEYS
        or lowered in ACCEPT_KEYS
        or lowered in CONTEXT_KEYS
        or lowered in CONCURRENCY_KEYS
        or any(h in lowered for h in _METRIC_HINTS)
    )


def config_of(record: Any) -> dict[str, ConfigValue]:
    """The configuration a sweep file states: top-level scalars and config-like dicts."""
    if not isinstance(record, Mapping):
        return {}
    config: dict[str, ConfigValue] = {}
    for key, value in record.items():
        name = str(key)
        lowered = name.lower()
        if lowered in CONFIG_DICTS and isinstance(value, Mapping):
            config.update((str(k), v) for k, v in value.items() if is_scalar(v))
        elif is_scalar(value) and (
            not isinstance(value, int | float)
            or isinstance(value, bool)
            or not _measured_name(lowered)
        ):
            config[name] = value
    return config
