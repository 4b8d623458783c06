"""SGLang's periodic `Decode batch` and `Prefill batch` statistics lines, in every release.

The numbers the console charts (acceptance length, throughput, queue) come from these two
lines, and SGLang has reshaped them in almost every release: `.` vs `,` after the name (0.5.4),
`[N]` forward counts, `accept rate` (0.5.4 on), `<device> graph:` (0.4.6 on), a trailing `, `
that came and went, PD-disaggregation prefill servers with no `#running-req` (0.4.10), SWA and
hisparse token fields. So fields are read by name, every field is optional, an unknown one is
kept in `fields`, and only a line with no `key: value` field at all is dropped.

Pure functions and slots dataclasses (immutable by convention; frozen ones cost too much per
line), no I/O, no Textual. The compiled shapes are a bounded module-level cache.

Past 500 lines because every release's shape of the two lines is read here, with the column
path a flood needs beside the line-by-line one.
"""

from __future__ import annotations

import itertools
import math
import operator
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from console.watch.header import Header, prefix_header

_isfinite = math.isfinite

__all__ = [
    "DecodeBatch",
    "DecodeColumns",
    "DecodeNumbers",
    "PrefillBatch",
    "decode_columns",
    "decode_numbers",
    "decode_numbers_of",
    "parse_decode",
    "parse_prefill",
    "token_usage_of",
]

_DECODE_RE = re.compile(r"Decode batch(?: \[(\d+)\])?[.,] ")
_PREFILL_RE = re.compile(r"Prefill batch(?: \[(\d+)\])?[.,] ")
_GRAPH_BACKENDS = frozenset({"cuda", "npu", "cpu", "musa", "xpu"})
# Normal models print `#token`; hybrid SWA models `#full token`; hisparse `#gpu token`.
_TOKEN_KEYS = ("#token", "#full token", "#gpu token")
_USAGE_KEYS = ("token usage", "full token usage", "gpu token usage")
_USAGE_RE = re.compile(r"(?:full |gpu )?token usage: ([0-9]+(?:\.[0-9]+)?)")


def _first(values: Mapping[str, float], keys: tuple[str, ...]) -> float | None:
    for key in keys:
        value = values.get(key)
        if value is not None:
            return value
    return None


def _int_or_none(value: float | None) -> int | None:
    return None if value is None else int(value)


def _read_fields_generic(text: str) -> tuple[dict[str, float], str | None, bool | None]:
    """The `key: value` fields of a batch line, and its `<device> graph: True|False` field.

    Values are numbers, some with a `%` suffix. Anything else is skipped, which is what keeps
    the parser working when SGLang adds a field this code has never seen.
    """
    values: dict[str, float] = {}
    backend: str | None = None
    graph: bool | None = None
    for item in text.rstrip().rstrip(",").split(", "):
        key, sep, raw = item.partition(": ")
        if not sep:
            continue
        if key.endswith(" graph") and key[:-6] in _GRAPH_BACKENDS:
            if raw == "True" or raw == "False":
                backend, graph = key[:-6], raw == "True"
            continue
        try:
            number = float(raw.rstrip("%"))
        except ValueError:
            continue
        if math.isfinite(number):
            values[key.strip()] = number
    return values, backend, graph


_Fields = tuple[dict[str, float], str | None, bool | None]
"""A batch line's numeric fields, its graph backend and whether it ran in a graph."""

# --- Shapes: one compiled pass per line ------------------------------------------------------
#
# A server prints the same fields in the same order on every batch line; only the numbers
# change. The first line of a shape is read field by field (above) and becomes a regular
# expression with its keys as literals; the lines after it are one `fullmatch` and a `float`
# per number. A shape admits only what the field-by-field reading reads the same way (items
# split at the same `, `, values that are finite numbers, `True`/`False` graph fields, other
# items without `:` or `,`); a line it does not fit is read field by field again.

_PART = {"other": r"[^:,]*", "graph": "{}: (True|False)", "value": r"{}: ([^,%]*)%*"}
"""The regular expression of each kind of field in a shape (`(kind, key as printed)`), for
its `re.escape`d key."""
_LINES_PART = {
    "other": r"[^:,\n]*",
    "graph": "{}: (True|False)",
    "value": r"{}: [^,%\n]*%*",
    "charted": r"{}: ([^,%\n]*)%*",
}
"""The same, for lines joined by newlines: nothing matches a newline, and only what
`decode_numbers` reads is captured."""
_CHARTED = ("gen throughput (token/s)", "#running-req", "#queue-req", "accept len", "accept rate")
"""The decode fields a live monitor charts, in `DecodeNumbers` order."""
_SHAPE_OTHER_RE = re.compile(_PART["other"])
SHAPES_KEPT = 8
"""Shapes remembered per kind of line (a host prints one or two; a fleet of releases a few)."""


def _repeating(texts: tuple[str, ...]) -> list[float]:
    """`float` of each text, each distinct text converted once: a column of counts or
    two-decimal ratios (requests, accept len and rate) holds a few values over hundreds of
    lines, and `float` of a text costs ~0.15 µs, five times a dictionary lookup."""
    table = {text: float(text) for text in set(texts)}
    return list(map(table.__getitem__, texts))


class _Shape:
    """One layout of a batch line's fields, compiled."""

    __slots__ = (
        "_charted_all",
        "_graph",
        "_keys",
        "_lines",
        "_lines_charted",
        "_lines_graph",
        "_lines_regex",
        "_numbers",
        "charted",
        "fullmatch",
    )

    def __init__(
        self,
        parts: list[tuple[str, str]],
        keys: tuple[str, ...],
        groups: int,
        graph: tuple[int, str] | None,
    ) -> None:
        self.fullmatch = re.compile(
            ", ".join(_PART[kind].format(re.escape(key)) for kind, key in parts) + r",*\s*"
        ).fullmatch
        self._lines_regex: str | None = None
        """The shape after a decode line's name, as whole lines among many joined by
        newlines (no part matches one, so a match is one line), capturing the charted
        numbers and the graph field only; None when a key holds a newline."""
        self._lines: re.Pattern[str] | None = None
        """`_lines_regex` compiled, once a slice of lines is read with it."""
        self._lines_charted: Callable[[Sequence[Any]], tuple[Any, ...]] | None = None
        self._lines_graph = -1
        """Where the five charted columns and the graph's are among `_lines_regex`'s."""
        self._keys = keys
        self._graph = graph
        numbers = [i for i in range(groups) if graph is None or i != graph[0]]
        self._numbers = operator.itemgetter(*numbers) if len(numbers) > 1 else None
        self.charted: tuple[int, int, int, int, int] | None = None
        """Where `decode_numbers`' five fields are among the groups (-1: absent); None when
        a key repeats (the field-by-field reading keeps the last one)."""
        self._charted_all: Callable[[Sequence[Any]], tuple[Any, ...]] | None = None
        """The five charted groups, when the shape has all five (most decode lines)."""
        if len(set(keys)) == len(keys):
            at = [keys.index(k) if k in keys else -1 for k in _CHARTED]
            # A key's group: its number's index, one more past the graph group.
            gen, run, queue, length, rate = (
                i if i < 0 or graph is None or i < graph[0] else i + 1 for i in at
            )
            self.charted = (gen, run, queue, length, rate)
            if min(self.charted) >= 0:
                self._charted_all = operator.itemgetter(*self.charted)
                self._lines_shape(parts)

    def _lines_shape(self, parts: list[tuple[str, str]]) -> None:
        if any("\n" in key for _, key in parts):
            return
        captured: list[str] = []
        lines: list[str] = []
        for kind, key in parts:
            if kind == "value" and key.strip() in _CHARTED:
                captured.append(key.strip())
                kind = "charted"
            elif kind == "graph":
                captured.append("")
            lines.append(_LINES_PART[kind].format(re.escape(key)))
        self._lines_charted = operator.itemgetter(*(captured.index(k) for k in _CHARTED))
        self._lines_graph = captured.index("") if "" in captured else -1
        self._lines_regex = r"Decode batch(?: \[\d+\])?[.,] " + ", ".join(lines) + r",*[^\S\n]*$"

    def floats(self, groups: tuple[str, ...]) -> list[float] | None:
        """The numbers in key order; None when one is no finite number."""
        raw = groups if self._graph is None else self._numbers(groups) if self._numbers else ()
        try:
            numbers = list(map(float, raw))
        except ValueError:
            return None
        return numbers if math.isfinite(sum(numbers)) else None

    def charted_numbers(self, groups: tuple[str, ...]) -> DecodeNumbers | None:
        """`decode_numbers` of a line of this shape (whose keys are unique); None when one of
        the five is no finite number (the field-by-field reading then skips it). The other
        fields are not read: the field-by-field reading skips a bad one and keeps these."""
        charted = self.charted
        assert charted is not None
        graph = self._graph
        backend, ran = (None, None) if graph is None else (graph[1], groups[graph[0]] == "True")
        pick = self._charted_all
        try:
            if pick is not None:
                gen, running, queue, length, rate = map(float, pick(groups))
                if not _isfinite(gen + running + queue + length + rate):
                    return None
                return (gen, int(running), int(queue), length, rate, backend, ran)
            numbers = [None if i < 0 else float(groups[i]) for i in charted]
        except ValueError:
            return None
        if not _isfinite(sum(n for n in numbers if n is not None)):
            return None
        gen_, running_, queue_, length_, rate_ = numbers
        return (
            gen_,
            None if running_ is None else int(running_),
            None if queue_ is None else int(queue_),
            length_,
            rate_,
            backend,
            ran,
        )

    def charted_columns(self, joined: str, count: int) -> DecodeColumns | None:
        """`charted_numbers` of each of `count` decode lines joined by newlines, all of this
        shape and each with its name once, a list a field; None unless every line fits and
        all five numbers of each are finite (read those line by line). One search for the
        lines and one `float` pass a field, instead of a search, a match and five floats a
        line."""
        pick = self._lines_charted
        if pick is None or self._lines_regex is None:
            return None
        if self._lines is None:
            self._lines = re.compile(self._lines_regex, re.MULTILINE)
        rows = self._lines.findall(joined)
        if len(rows) != count:
            return None
        columns: list[tuple[str, ...]] = list(zip(*rows, strict=True))
        gen_, running_, queue_, length_, rate_ = pick(columns)
        try:
            gen = list(map(float, gen_))
            running, queue, length, rate = map(_repeating, (running_, queue_, length_, rate_))
        except ValueError:
            return None
        if not _isfinite(sum(gen) + sum(running) + sum(queue) + sum(length) + sum(rate)):
            return None
        graph = self._graph
        return DecodeColumns(
            gen,
            list(map(int, running)),
            list(map(int, queue)),
            length,
            rate,
            None if graph is None else graph[1],
            None if graph is None else [g == "True" for g in columns[self._lines_graph]],
        )

    def graph(self, groups: tuple[str, ...]) -> tuple[str | None, bool | None]:
        """The line's graph backend and whether it ran in a graph (None, None: not printed)."""
        if self._graph is None:
            return None, None
        index, backend = self._graph
        return backend, groups[index] == "True"

    def read(self, groups: tuple[str, ...]) -> _Fields | None:
        """The fields, or None when a value is no finite number (read that line field by field)."""
        numbers = self.floats(groups)
        if numbers is None:
            return None
        return (dict(zip(self._keys, numbers, strict=True)), *self.graph(groups))

    @classmethod
    def of(cls, text: str) -> _Shape | None:
        """The shape of this line's fields; None when it has something a shape cannot hold."""
        parts: list[tuple[str, str]] = []
        keys: list[str] = []
        graph: tuple[int, str] | None = None
        for item in text.rstrip().rstrip(",").split(", "):
            key, sep, raw = item.partition(": ")
            if not sep:
                if _SHAPE_OTHER_RE.fullmatch(item) is None:
                    return None
                parts.append(("other", ""))
                continue
            if key.endswith(" graph") and key[:-6] in _GRAPH_BACKENDS:
                if (raw != "True" and raw != "False") or graph is not None:
                    return None
                parts.append(("graph", key))
                graph = (len(keys), key[:-6])
                continue
            try:
                number = float(raw.rstrip("%"))
            except ValueError:
                return None
            if not math.isfinite(number) or "," in raw:
                return None
            parts.append(("value", key))
            keys.append(key.strip())
        groups = len(keys) + (graph is not None)
        if len(keys) < 2:
            return None
        return cls(parts, tuple(keys), groups, graph)


def _matcher(shapes: list[_Shape]) -> Callable[[str], tuple[_Shape, tuple[str, ...]] | None]:
    def match(text: str) -> tuple[_Shape, tuple[str, ...]] | None:
        """The first remembered shape this text fits, and its groups."""
        for shape in shapes:
            found = shape.fullmatch(text)
            if found is not None:
                return shape, found.groups()
        return None

    return match


def _shaped_reader(shapes: list[_Shape]) -> Callable[[str], _Fields]:
    def read(text: str) -> _Fields:
        for shape in shapes:
            match = shape.fullmatch(text)
            if match is not None:
                fields = shape.read(match.groups())
                if fields is not None:
                    return fields
                break
        new = _Shape.of(text)
        if new is not None:
            shapes.insert(0, new)
            del shapes[SHAPES_KEPT:]
        return _read_fields_generic(text)

    return read


_DECODE_SHAPES: list[_Shape] = []
_read_decode_fields = _shaped_reader(_DECODE_SHAPES)
_match_decode_shape = _matcher(_DECODE_SHAPES)
_read_prefill_fields = _shaped_reader([])


class _BatchFields:
    """Lookup of the raw fields shared by decode and prefill lines.

    The batch classes are immutable by convention, not `frozen`: one is built for every batch
    line of a flood, and a frozen dataclass's `__init__` took 1.6 µs of the ~3 a line costs.
    """

    __slots__ = ()
    fields: tuple[tuple[str, float], ...]

    def field(self, key: str) -> float | None:
        """A field by the name SGLang prints, e.g. `"#swa token"` or `"fwd occupancy"`."""
        for name, value in self.fields:
            if name == key:
                return value
        return None


@dataclass(slots=True, unsafe_hash=True)
class DecodeBatch(_BatchFields):
    """A periodic `Decode batch` statistics line, in any of its format versions."""

    header: Header | None
    running_req: int | None = None
    queue_req: int | None = None
    """None when the line ends before `#queue-req` (some builds end with `gen throughput`)."""
    gen_throughput: float | None = None
    """Generated tokens per second since the previous decode line."""
    token: int | None = None
    """KV tokens in use (`#token`; `#full token` for SWA, `#gpu token` for hisparse)."""
    token_usage: float | None = None
    accept_len: float | None = None
    """Mean tokens committed per request per verify step, bonus token included (spec only)."""
    accept_rate: float | None = None
    """Accepted / proposed drafts. Not printed before 0.5.4; its definition changed in 0.5.10 and
    again in 0.5.16, so values from different releases are not comparable."""
    graph_backend: str | None = None
    """`"cuda"`, `"npu"`, `"cpu"` or `"musa"`; None on builds before the graph field existed."""
    graph: bool | None = None
    """Whether the batch ran in a device graph."""
    iteration: int | None = None
    """The forward count printed as `Decode batch [N]`, when SGLang prints it."""
    fields: tuple[tuple[str, float], ...] = ()
    """Every numeric field as printed, in order (SWA, mamba, PD, MFU and occupancy fields)."""

    @property
    def preallocated_usage(self) -> float | None:
        """PD-disaggregation decode servers only."""
        return self.field("pre-allocated usage")

    @property
    def fwd_occupancy(self) -> float | None:
        """Percent, with `SGLANG_ENABLE_METRICS_DEVICE_TIMER`."""
        return self.field("fwd occupancy")


@dataclass(slots=True, unsafe_hash=True)
class PrefillBatch(_BatchFields):
    """A `Prefill batch` statistics line, old (`cache hit rate`) or new (`input throughput`)."""

    header: Header | None
    new_seq: int | None = None
    new_token: int | None = None
    cached_token: int | None = None
    running_req: int | None = None
    """None on a PD-disaggregation prefill server (it prints `#unbootstrapped-req` instead)."""
    queue_req: int | None = None
    token_usage: float | None = None
    pending_token: int | None = None
    cache_hit_rate_pct: float | None = None
    """Only the 2025-01 format prints it, in percent."""
    graph_backend: str | None = None
    graph: bool | None = None
    input_throughput: float | None = None
    """Prefill tokens per second; builds from 2026-01-30 on."""
    iteration: int | None = None
    fields: tuple[tuple[str, float], ...] = ()


def parse_decode(message: str) -> DecodeBatch | None:
    """A `Decode batch` line; None when it carries no field at all (a cut-off line)."""
    match = _DECODE_RE.search(message)
    if match is None:
        return None
    values, backend, graph = _read_decode_fields(message[match.end() :])
    if not values and graph is None:
        return None
    iteration = match.group(1)
    # Positional and inlined (`_first`, `_int_or_none`): once per decode line of a flood.
    get = values.get
    running, queue = get("#running-req"), get("#queue-req")
    token = get("#token")
    if token is None:
        token = _first(values, _TOKEN_KEYS)
    usage = get("token usage")
    if usage is None:
        usage = _first(values, _USAGE_KEYS)
    return DecodeBatch(
        prefix_header(message[: match.start()]),
        None if running is None else int(running),
        None if queue is None else int(queue),
        get("gen throughput (token/s)"),
        None if token is None else int(token),
        usage,
        get("accept len"),
        get("accept rate"),
        backend,
        graph,
        None if iteration is None else int(iteration),
        tuple(values.items()),
    )


DecodeNumbers = tuple[
    float | None, int | None, int | None, float | None, float | None, str | None, bool | None
]
"""What a live monitor keeps of a decode line: `(gen_throughput, running_req, queue_req,
accept_len, accept_rate, graph_backend, graph)`, as `DecodeBatch` has them."""


def decode_numbers(message: str) -> DecodeNumbers | None:
    """`parse_decode`'s numbers without the `DecodeBatch` (no header, no field list): the
    monitor reads every decode line of a flood and charts only these."""
    match = _DECODE_RE.search(message)
    if match is None:
        return None
    text = message[match.end() :]
    found = _match_decode_shape(text)
    if found is not None and found[0].charted is not None:
        # Straight from the shape's groups: no dict of every field, no float of the others.
        numbers = found[0].charted_numbers(found[1])
        if numbers is not None:
            return numbers
    values, backend, graph = _read_decode_fields(text)
    if not values and graph is None:
        return None
    get = values.get
    running, queue = get("#running-req"), get("#queue-req")
    return (
        get("gen throughput (token/s)"),
        None if running is None else int(running),
        None if queue is None else int(queue),
        get("accept len"),
        get("accept rate"),
        backend,
        graph,
    )


BATCHED_LINES = 8
"""Decode lines read together at least (fewer are read one by one: the same cost)."""


@dataclass(slots=True)
class DecodeColumns:
    """`DecodeNumbers` of many decode lines, a list a field: every line has all five charted
    numbers, all finite (what a live monitor writes to its series a slice at a time)."""

    gen_throughput: list[float]
    running_req: list[int]
    queue_req: list[int]
    accept_len: list[float]
    accept_rate: list[float]
    graph_backend: str | None
    graph: list[bool] | None
    """Each line's graph field; None when the lines do not print one."""

    def rows(self) -> list[DecodeNumbers]:
        """The lines' `DecodeNumbers`, in order."""
        graph: Iterable[bool | None] = itertools.repeat(None) if self.graph is None else self.graph
        return list(
            zip(
                self.gen_throughput,
                self.running_req,
                self.queue_req,
                self.accept_len,
                self.accept_rate,
                itertools.repeat(self.graph_backend),
                graph,
                strict=False,  # `repeat` is endless; the other fields have a value a line
            )
        )


def decode_columns(messages: list[str]) -> DecodeColumns | None:
    """`decode_numbers` of every message (each holds `Decode batch`) as columns, when they
    are read together; None when they must be read one by one.

    A flood's decode lines share one shape: they are joined and read by one search (the
    newest shape's, as each line alone would be matched first), when each line holds its
    name once, so that the search finds what `_DECODE_RE` finds. Anything else — another
    shape, a bad number, a missing field, a multi-line record — is None.
    """
    count = len(messages)
    if count < BATCHED_LINES or not _DECODE_SHAPES:
        return None
    joined = "\n".join(messages)
    if joined.count("\n") != count - 1 or joined.count("Decode batch") != count:
        return None
    return _DECODE_SHAPES[0].charted_columns(joined, count)


def decode_numbers_of(messages: list[str]) -> Sequence[DecodeNumbers | None]:
    """`decode_numbers` of each message (each holds `Decode batch`), in order: read together
    when `decode_columns` can, else one by one."""
    columns = decode_columns(messages)
    if columns is not None:
        return columns.rows()
    return [decode_numbers(message) for message in messages]


def token_usage_of(message: str) -> float | None:
    """The share of the KV cache in use a batch line reports (`token usage: 0.42`; `full` or
    `gpu token usage` for SWA and hisparse models); None without one. For the newest line of
    a slice, beside the columns the flood is read into (which leave it out)."""
    match = _USAGE_RE.search(message)
    return float(match.group(1)) if match else None


def parse_prefill(message: str) -> PrefillBatch | None:
    """A `Prefill batch` line; None when it carries no field at all (a cut-off line)."""
    match = _PREFILL_RE.search(message)
    if match is None:
        return None
    values, backend, graph = _read_prefill_fields(message[match.end() :])
    if not values and graph is None:
        return None
    iteration = match.group(1)
    return PrefillBatch(
        header=prefix_header(message[: match.start()]),
        new_seq=_int_or_none(values.get("#new-seq")),
        new_token=_int_or_none(values.get("#new-token")),
        cached_token=_int_or_none(values.get("#cached-token")),
        running_req=_int_or_none(values.get("#running-req")),
        queue_req=_int_or_none(values.get("#queue-req")),
        token_usage=_first(values, _USAGE_KEYS),
        pending_token=_int_or_none(values.get("#pending-token")),
        cache_hit_rate_pct=values.get("cache hit rate"),
        graph_backend=backend,
        graph=graph,
        input_throughput=values.get("input throughput (token/s)"),
        iteration=None if iteration is None else int(iteration),
        fields=tuple(values.items()),
    )
