"""Parse the lines an SGLang server writes to its journal.

Everything the console shows about a running server (acceptance length, throughput, CUDA-graph
state, load progress, crashes) is read from these lines, and SGLang has reshaped them many times
(`reference/sglang.md` §1.3: `.` vs `,` after `Decode batch`, a trailing `, ` that came and went,
fields added in the middle). So the parser is tolerant by construction: it searches instead of
anchoring (journald and Ray prefixes may come first), reads `key: value` fields by name rather
than by position, and ignores fields it does not know.

It runs on every journal line, tens of thousands a second, so each recogniser sits behind a cheap
substring test and an ordinary line costs a handful of `in` checks.

Crash signatures and a profile's `[[metrics]]` patterns are in `console.watch.signatures`.

Pure functions and frozen dataclasses: no I/O, no Textual.
"""

from __future__ import annotations

import ast
import functools
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from types import MappingProxyType
from typing import Literal, TypeAlias

# Crash signatures and profile metrics live in their own module; they stay importable from
# here because this is where DESIGN.md (and existing callers) look for them.
from console.watch.signatures import CRASH_SIGNATURES, CustomMetrics, crash_signature

__all__ = [
    "CRASH_SIGNATURES",
    "ArgValue",
    "CustomMetrics",
    "DecodeBatch",
    "DraftRunnerInit",
    "GraphCapture",
    "Header",
    "KVCacheAllocated",
    "ParsedLine",
    "PrefillBatch",
    "ServerArgsLine",
    "ServerReady",
    "WeightLoad",
    "crash_signature",
    "has_header",
    "parse_header",
    "parse_line",
]

Phase = Literal["begin", "end"]
ArgValue: TypeAlias = str | int | float | bool | None
"""A `server_args=` value simple enough to read back as a Python literal."""

_TS = r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:\.\d{1,6})?"
# Any subset of DP, PP, ATTN_CP, MOE_DP, TP, EP in any order; unknown future ranks are kept too.
_RANKS = r"(?: [A-Z][A-Z_]*\d+)*"
_HEADER_RE = re.compile(rf"\[(?P<ts>{_TS})(?P<ranks>{_RANKS})\]")
_RANK_RE = re.compile(r"([A-Z][A-Z_]*?)(\d+)")
# `journalctl -o short` (`Jun 01 12:00:00 gpu-host python3[12345]: `) or `-o short-iso`.
_JOURNAL_PREFIX = (
    r"(?:[A-Z][a-z]{2} [ \d]\d \d{2}:\d{2}:\d{2}(?:\.\d+)?"
    r"|\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:?\d{2})?)"
    r" \S+ [^\s\[:]+(?:\[\d+\])?: "
)
# Ray-style process prefix: `(Worker pid=123, ip=10.0.0.1) `.
_WORKER_PREFIX = r"\(\w+ pid=\d+(?:,?\s*ip=[^)\s]+)?\)\s*"
_HAS_HEADER_RE = re.compile(rf"(?:{_JOURNAL_PREFIX})?(?:{_WORKER_PREFIX})?\[{_TS}{_RANKS}\]")


@dataclass(frozen=True, slots=True)
class Header:
    """The `[2026-07-21 15:00:13 TP0 EP0]` prefix of an SGLang log record."""

    timestamp: str
    """As printed: local time of the server, `YYYY-MM-DD HH:MM:SS` with optional `.mmm`."""
    ranks: tuple[tuple[str, int], ...] = ()
    """Parallel ranks in printed order, e.g. `(("DP", 0), ("TP", 0))`; empty on TP=1 servers."""

    def rank(self, kind: str) -> int | None:
        """The rank of one kind (`"TP"`, `"DP"`, `"ATTN_CP"`...), or None when not printed."""
        for name, value in self.ranks:
            if name == kind:
                return value
        return None

    @property
    def label(self) -> str:
        """The ranks as printed (`"DP0 TP0"`), empty when there are none."""
        return " ".join(f"{name}{value}" for name, value in self.ranks)

    def time(self) -> datetime:
        """The timestamp as a naive datetime in the server's local time zone."""
        fmt = "%Y-%m-%d %H:%M:%S.%f" if "." in self.timestamp else "%Y-%m-%d %H:%M:%S"
        return datetime.strptime(self.timestamp, fmt)


def parse_header(message: str) -> Header | None:
    """The first SGLang header anywhere in `message`, whatever prefixes come before it."""
    if "[" not in message:
        return None
    match = _HEADER_RE.search(message)
    if match is None:
        return None
    return Header(match.group("ts"), _parse_ranks(match.group("ranks")))


@functools.lru_cache(maxsize=256)
def _parse_ranks(ranks: str) -> tuple[tuple[str, int], ...]:
    # A host prints a handful of distinct rank prefixes, over and over.
    return tuple((m.group(1), int(m.group(2))) for m in _RANK_RE.finditer(ranks))


def has_header(message: str) -> bool:
    """True when the line starts a new record: an SGLang `[ts ...]` header at its start.

    A journald `short` prefix and a `(Worker pid=..)` prefix may come first. Lines without a
    header (traceback frames, the rest of a multi-line `server_args=`) continue the record
    before them.
    """
    return _HAS_HEADER_RE.match(message) is not None


# --- Decode and prefill statistics ---------------------------------------------------------

_DECODE_RE = re.compile(r"Decode batch(?: \[(\d+)\])?[.,] ")
_PREFILL_RE = re.compile(r"Prefill batch(?: \[(\d+)\])?[.,] ")
_GRAPH_BACKENDS = frozenset({"cuda", "npu", "cpu", "musa"})
# Normal models print `#token`; hybrid SWA models `#full token`; hisparse `#gpu token`.
_TOKEN_KEYS = ("#token", "#full token", "#gpu token")
_USAGE_KEYS = ("token usage", "full token usage", "gpu token usage")


def _first(values: Mapping[str, float], keys: tuple[str, ...]) -> float | None:
    for key in keys:
        value = values.get(key)
        if value is not None:
            return value
    return None


def _int_or_none(value: float | None) -> int | None:
    return None if value is None else int(value)


def _read_fields(text: str) -> tuple[dict[str, float], str | None, bool | None]:
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


class _BatchFields:
    """Lookup of the raw fields shared by decode and prefill lines."""

    __slots__ = ()
    fields: tuple[tuple[str, float], ...]

    def field(self, key: str) -> float | None:
        """A field by the name SGLang prints, e.g. `"#swa token"` or `"fwd occupancy"`."""
        for name, value in self.fields:
            if name == key:
                return value
        return None


@dataclass(frozen=True, slots=True)
class DecodeBatch(_BatchFields):
    """A periodic `Decode batch` statistics line, in any of its format versions."""

    header: Header | None
    running_req: int
    queue_req: int
    gen_throughput: float
    """Generated tokens per second since the previous decode line."""
    token: int | None = None
    """KV tokens in use (`#token`; `#full token` for SWA, `#gpu token` for hisparse)."""
    token_usage: float | None = None
    accept_len: float | None = None
    """Mean tokens committed per request per verify step, bonus token included (spec only)."""
    accept_rate: float | None = None
    """Accepted / proposed drafts; present from v0.5.3, its definition changed 2026-04-28."""
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


@dataclass(frozen=True, slots=True)
class PrefillBatch(_BatchFields):
    """A `Prefill batch` statistics line, old (`cache hit rate`) or new (`input throughput`)."""

    header: Header | None
    new_seq: int
    new_token: int
    cached_token: int
    running_req: int
    queue_req: int
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


def _parse_decode(message: str) -> DecodeBatch | None:
    match = _DECODE_RE.search(message)
    if match is None:
        return None
    values, backend, graph = _read_fields(message[match.end() :])
    running = values.get("#running-req")
    throughput = values.get("gen throughput (token/s)")
    queue = values.get("#queue-req")
    if running is None or throughput is None or queue is None:
        return None
    iteration = match.group(1)
    return DecodeBatch(
        header=parse_header(message[: match.start()]),
        running_req=int(running),
        queue_req=int(queue),
        gen_throughput=throughput,
        token=_int_or_none(_first(values, _TOKEN_KEYS)),
        token_usage=_first(values, _USAGE_KEYS),
        accept_len=values.get("accept len"),
        accept_rate=values.get("accept rate"),
        graph_backend=backend,
        graph=graph,
        iteration=None if iteration is None else int(iteration),
        fields=tuple(values.items()),
    )


def _parse_prefill(message: str) -> PrefillBatch | None:
    match = _PREFILL_RE.search(message)
    if match is None:
        return None
    values, backend, graph = _read_fields(message[match.end() :])
    required = [
        values.get(key)
        for key in ("#new-seq", "#new-token", "#cached-token", "#running-req", "#queue-req")
    ]
    if any(value is None for value in required):
        return None
    new_seq, new_token, cached, running, queue = (int(v) for v in required if v is not None)
    iteration = match.group(1)
    return PrefillBatch(
        header=parse_header(message[: match.start()]),
        new_seq=new_seq,
        new_token=new_token,
        cached_token=cached,
        running_req=running,
        queue_req=queue,
        token_usage=_first(values, _USAGE_KEYS),
        pending_token=_int_or_none(values.get("#pending-token")),
        cache_hit_rate_pct=values.get("cache hit rate"),
        graph_backend=backend,
        graph=graph,
        input_throughput=values.get("input throughput (token/s)"),
        iteration=None if iteration is None else int(iteration),
        fields=tuple(values.items()),
    )


# --- Startup lines -------------------------------------------------------------------------

_NUM = r"(\d+(?:\.\d+)?)"
_AVAIL_MEM_RE = re.compile(rf"avail mem={_NUM} GB")
_MEM_USAGE_RE = re.compile(rf"mem usage={_NUM} GB")
_ELAPSED_RE = re.compile(rf"elapsed(?:=|: ){_NUM} ?s\b")
_LOAD_RE = re.compile(r"Load weight (begin|end)\.")
_TYPE_RE = re.compile(r"\btype=(\w+)")
_KV_TOKENS_RE = re.compile(r"#tokens: (\d+)")
_K_SIZE_RE = re.compile(rf"\bK size: {_NUM} GB")
_V_SIZE_RE = re.compile(rf"\bV size: {_NUM} GB")
_KV_SIZE_RE = re.compile(rf"\bKV size: {_NUM} GB")
_DTYPE_RE = re.compile(r"\bdtype: ([\w.]+)")
_CAPTURE_RE = re.compile(
    r"Capture (?:(target|draft) )?(?:(decode|verify|extend|prefill) )?"
    r"(cuda|CUDA|npu|NPU|cpu|CPU|musa|MUSA) graph (begin|end)\b"
)
_BACKEND_RE = re.compile(r"\bbackend=([\w-]+)")
_BS_RE = re.compile(r"\bbs=\[([\d, ]*)\]")
_TOKENS_PER_RE = re.compile(r"\bnum_tokens_per_(?:bs|req)=(\d+)")
_INIT_RE = re.compile(r"Initialized (DFLASH|DDTREE)\b")
# `key=value`, or `key: value` when the value is not itself the start of a `k=v` pair.
_PARAM_RE = re.compile(r"([A-Za-z_][\w.]*)(?:=([^,\s]+)|: ([^,\s=]+)(?=[,\s]|$))")
_READY = "The server is fired up and ready to roll!"
_SERVER_ARGS = "server_args=ServerArgs("


def _float(pattern: re.Pattern[str], text: str) -> float | None:
    match = pattern.search(text)
    return None if match is None else float(match.group(1))


@dataclass(frozen=True, slots=True)
class WeightLoad:
    """`Load weight begin/end`: once for the target model, once more for a draft model."""

    header: Header | None
    phase: Phase
    avail_mem_gb: float | None = None
    elapsed_s: float | None = None
    model_type: str | None = None
    """The model class name (`type=...`), on `end` lines."""
    mem_usage_gb: float | None = None


@dataclass(frozen=True, slots=True)
class KVCacheAllocated:
    """`KV Cache is allocated`: the KV pool size decides how many requests fit."""

    header: Header | None
    tokens: int | None = None
    k_size_gb: float | None = None
    v_size_gb: float | None = None
    kv_size_gb: float | None = None
    """Newer builds print one `KV size` instead of `K size` and `V size`."""
    dtype: str | None = None


@dataclass(frozen=True, slots=True)
class GraphCapture:
    """A device-graph capture starting or finishing, in the old or the renamed (#23906) form.

    Old builds print `Capture cuda graph begin` (role and stage None: the target's decode or
    verify graph) and `Capture draft [extend ]cuda graph`; newer ones name both, as in
    `Capture target verify CUDA graph begin. backend=full, ...`.
    """

    header: Header | None
    phase: Phase
    role: Literal["target", "draft"] | None = None
    stage: Literal["decode", "verify", "extend", "prefill"] | None = None
    device: str = "cuda"
    backend: str | None = None
    """`full`, `breakable`, ... (newer builds)."""
    batch_sizes: tuple[int, ...] = ()
    tokens_per_bs: int | None = None
    avail_mem_gb: float | None = None
    elapsed_s: float | None = None
    mem_usage_gb: float | None = None


@dataclass(frozen=True, slots=True)
class ServerReady:
    """`The server is fired up and ready to roll!`: warm-up succeeded, requests are served."""

    header: Header | None


@dataclass(frozen=True, slots=True)
class ServerArgsLine:
    """The `server_args=ServerArgs(...)` record: the flags in effect after auto-adjustment."""

    header: Header | None
    raw: str
    """The text between `ServerArgs(` and its closing parenthesis (or the end of the line)."""
    args: Mapping[str, ArgValue] = field(default_factory=dict, hash=False)
    """Every argument whose value is a plain literal (str, int, float, bool, None)."""
    complete: bool = True
    """False when the closing parenthesis was not seen (a record cut into journal entries)."""


@dataclass(frozen=True, slots=True)
class DraftRunnerInit:
    """`Initialized DFLASH draft runner. ...` or an `Initialized DDTREE ...` line."""

    header: Header | None
    algorithm: str
    """`"DFLASH"` or `"DDTREE"`."""
    text: str
    """The message from `Initialized` on."""
    params: Mapping[str, str] = field(default_factory=dict, hash=False)
    """`key=value` (or `key: value`) pairs as printed, e.g. `block_size` -> `"16"`."""


ParsedLine: TypeAlias = (
    DecodeBatch
    | PrefillBatch
    | WeightLoad
    | KVCacheAllocated
    | GraphCapture
    | ServerReady
    | ServerArgsLine
    | DraftRunnerInit
)


def _parse_weight_load(message: str) -> WeightLoad | None:
    match = _LOAD_RE.search(message)
    if match is None:
        return None
    rest = message[match.end() :]
    model_type = _TYPE_RE.search(rest)
    return WeightLoad(
        header=parse_header(message[: match.start()]),
        phase="begin" if match.group(1) == "begin" else "end",
        avail_mem_gb=_float(_AVAIL_MEM_RE, rest),
        elapsed_s=_float(_ELAPSED_RE, rest),
        model_type=None if model_type is None else model_type.group(1),
        mem_usage_gb=_float(_MEM_USAGE_RE, rest),
    )


def _parse_kv_cache(message: str) -> KVCacheAllocated:
    start = message.index("KV Cache is allocated")
    rest = message[start:]
    tokens = _KV_TOKENS_RE.search(rest)
    dtype = _DTYPE_RE.search(rest)
    return KVCacheAllocated(
        header=parse_header(message[:start]),
        tokens=None if tokens is None else int(tokens.group(1)),
        k_size_gb=_float(_K_SIZE_RE, rest),
        v_size_gb=_float(_V_SIZE_RE, rest),
        kv_size_gb=_float(_KV_SIZE_RE, rest),
        dtype=None if dtype is None else dtype.group(1),
    )


_ROLES: dict[str, Literal["target", "draft"]] = {"target": "target", "draft": "draft"}
_STAGES: dict[str, Literal["decode", "verify", "extend", "prefill"]] = {
    "decode": "decode",
    "verify": "verify",
    "extend": "extend",
    "prefill": "prefill",
}


def _parse_capture(message: str) -> GraphCapture | None:
    match = _CAPTURE_RE.search(message)
    if match is None:
        return None
    role, stage, device, phase = match.groups()
    rest = message[match.end() :]
    backend = _BACKEND_RE.search(rest)
    sizes = _BS_RE.search(rest)
    per_bs = _TOKENS_PER_RE.search(rest)
    return GraphCapture(
        header=parse_header(message[: match.start()]),
        phase="begin" if phase == "begin" else "end",
        role=None if role is None else _ROLES[role],
        stage=None if stage is None else _STAGES[stage],
        device=device.lower(),
        backend=None if backend is None else backend.group(1),
        batch_sizes=()
        if sizes is None
        else tuple(int(s) for s in sizes.group(1).split(",") if s.strip()),
        tokens_per_bs=None if per_bs is None else int(per_bs.group(1)),
        avail_mem_gb=_float(_AVAIL_MEM_RE, rest),
        elapsed_s=_float(_ELAPSED_RE, rest),
        mem_usage_gb=_float(_MEM_USAGE_RE, rest),
    )


def _split_top_level(text: str) -> tuple[list[str], int | None]:
    """Split `a=1, b=[1, 2], c='x, y')...` at top-level commas, up to the closing `)`.

    Returns the items and the index of the closing parenthesis (None when the text ends first).
    """
    items: list[str] = []
    depth = 0
    quote = ""
    start = 0
    i = 0
    while i < len(text):
        ch = text[i]
        if quote:
            if ch == "\\":
                i += 1
            elif ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            if depth == 0:
                items.append(text[start:i])
                return items, i
            depth -= 1
        elif ch == "," and depth == 0:
            items.append(text[start:i])
            start = i + 1
        i += 1
    items.append(text[start:])
    return items, None


def _literal(raw: str) -> tuple[bool, ArgValue]:
    try:
        value = ast.literal_eval(raw)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return False, None
    if value is None or isinstance(value, str | int | float | bool):
        return True, value
    return False, None


def _parse_server_args(message: str) -> ServerArgsLine:
    start = message.index(_SERVER_ARGS)
    body = message[start + len(_SERVER_ARGS) :]
    items, end = _split_top_level(body)
    args: dict[str, ArgValue] = {}
    for item in items:
        key, sep, raw = item.strip().partition("=")
        if not sep or not key.isidentifier():
            continue
        simple, value = _literal(raw.strip())
        if simple:
            args[key] = value
    return ServerArgsLine(
        header=parse_header(message[:start]),
        raw=body if end is None else body[:end],
        args=MappingProxyType(args),
        complete=end is not None,
    )


def _parse_init(message: str) -> DraftRunnerInit | None:
    match = _INIT_RE.search(message)
    if match is None:
        return None
    text = message[match.start() :].rstrip()
    params = {
        m.group(1): m.group(2) or m.group(3)
        for m in _PARAM_RE.finditer(text, match.end() - match.start())
    }
    return DraftRunnerInit(
        header=parse_header(message[: match.start()]),
        algorithm=match.group(1),
        text=text,
        params=MappingProxyType(params),
    )


def parse_line(message: str) -> ParsedLine | None:
    """Recognise one SGLang log line (or a whole multi-line record); None for anything else.

    Prefixes before the `[ts ...]` header (journald `short`, `(Worker pid=..)`) are skipped, and
    a line without a header still parses, with `header` None.
    """
    if "Decode batch" in message:
        return _parse_decode(message)
    if "Prefill batch" in message:
        return _parse_prefill(message)
    if "Capture " in message and " graph " in message:
        return _parse_capture(message)
    if "Load weight " in message:
        return _parse_weight_load(message)
    if "KV Cache is allocated" in message:
        return _parse_kv_cache(message)
    if _READY in message:
        return ServerReady(parse_header(message[: message.index(_READY)]))
    if _SERVER_ARGS in message:
        return _parse_server_args(message)
    if "Initialized D" in message:
        return _parse_init(message)
    return None
