"""SGLang's start-up lines: weights, KV cache, graph capture, server args, draft runners, ready.

What a restart is doing (loading, capturing, serving) and with which settings is read from these
once-per-start lines. Their wording changed across releases (`Capture cuda graph begin` up to
0.5.10, `Capture target verify CUDA graph begin. backend=...` from 0.5.16; `Initialized DFLASH
draft runner`, `Initialized DDTree worker`, `Initialized DSpark draft runner`), so each is a
loose search behind a substring gate, and parameters are read as `key=value` pairs by name.

Pure functions and frozen dataclasses: no I/O, no Textual.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal, TypeAlias

from console.watch.header import Header, parse_header

__all__ = [
    "READY",
    "SERVER_ARGS",
    "SERVER_ARGS_DICT",
    "ArgValue",
    "DraftRunnerInit",
    "GraphCapture",
    "KVCacheAllocated",
    "ServerArgsLine",
    "ServerReady",
    "WeightLoad",
    "deprecation_warning",
    "is_kv_cache",
    "parse_capture",
    "parse_init",
    "parse_kv_cache",
    "parse_server_args",
    "parse_weight_load",
]

Phase = Literal["begin", "end"]
ArgValue: TypeAlias = str | int | float | bool | None
"""A `server_args=` value simple enough to read back as a Python literal."""

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
# `Capture cuda graph begin`, `Capture draft extend cuda graph begin (step 2)`, `Capture
# piecewise CUDA graph end`, `Capture target verify CUDA graph begin`, `Capture UNO tree draft
# CUDA graph begin`: up to four words name the graph before the device.
_CAPTURE_RE = re.compile(
    r"Capture ((?:[\w-]+ ){0,4}?)(cuda|CUDA|npu|NPU|cpu|CPU|musa|MUSA|xpu|XPU) graph (begin|end)\b"
)
_BACKEND_RE = re.compile(r"\bbackend=([\w-]+)")
_BS_RE = re.compile(r"\bbs=\[([\d, ]*)\]")
_TOKENS_PER_RE = re.compile(r"\bnum_tokens_per_(?:bs|req)=(\d+)")
# `Initialized DFLASH draft runner.` (0.5.16+), `Initialized DSpark draft runner.` (0.5.16+),
# and the public DDTree branches' `Initialized DDTree worker.` / `Initialized DDTREE v2 worker`.
_INIT_RE = re.compile(r"Initialized (DFLASH|DFlash|DDTREE|DDTree|DSPARK|DSpark)\b(?: (v\d+)\b)?")
# `key=value`, or `key: value` when the value is not itself the start of a `k=v` pair.
_PARAM_RE = re.compile(r"([A-Za-z_][\w.]*)(?:=([^,\s]+)|: ([^,\s=]+)(?=[,\s]|$))")
READY = "The server is fired up and ready to roll!"
SERVER_ARGS = "server_args=ServerArgs("
SERVER_ARGS_DICT = "server_args={"
"""0.5.23 prints the resolved arguments as a dict (`engine.py: server_args={...}`)."""
_KV_MARKERS = ("KV Cache is allocated", "KV Cache VA upper bound", "KV cache allocated")


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
    stage: Literal["decode", "verify", "extend", "prefill", "piecewise"] | None = None
    device: str = "cuda"
    name: str = ""
    """The words before the device as printed (`"target verify"`, `"UNO tree draft"`)."""
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
    """`"DFLASH"`, `"DDTREE"` or `"DSPARK"`, whatever case the build prints."""
    text: str
    """The message from `Initialized` on."""
    params: Mapping[str, str] = field(default_factory=dict, hash=False)
    """`key=value` (or `key: value`) pairs as printed, e.g. `block_size` -> `"16"`."""
    variant: str | None = None
    """`"v2"` for `Initialized DDTREE v2 worker`."""


def parse_weight_load(message: str) -> WeightLoad | None:
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


def is_kv_cache(message: str) -> bool:
    """`KV Cache is allocated` (0.4.6 on), 0.5.23's `KV Cache VA upper bound` and
    `Post-capture KV sizing: KV cache allocated`."""
    return any(marker in message for marker in _KV_MARKERS)


def parse_kv_cache(message: str) -> KVCacheAllocated:
    start = min(i for m in _KV_MARKERS if (i := message.find(m)) >= 0)
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
_STAGES: dict[str, Literal["decode", "verify", "extend", "prefill", "piecewise"]] = {
    "decode": "decode",
    "verify": "verify",
    "extend": "extend",
    "prefill": "prefill",
    "piecewise": "piecewise",
}


def parse_capture(message: str) -> GraphCapture | None:
    match = _CAPTURE_RE.search(message)
    if match is None:
        return None
    words, device, phase = match.groups()
    names = words.split()
    role = next((_ROLES[w] for w in names if w in _ROLES), None)
    stage = next((_STAGES[w] for w in names if w in _STAGES), None)
    rest = message[match.end() :]
    backend = _BACKEND_RE.search(rest)
    sizes = _BS_RE.search(rest)
    per_bs = _TOKENS_PER_RE.search(rest)
    return GraphCapture(
        header=parse_header(message[: match.start()]),
        phase="begin" if phase == "begin" else "end",
        role=role,
        stage=stage,
        device=device.lower(),
        name=" ".join(names),
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


def parse_server_args(message: str) -> ServerArgsLine:
    """`server_args=ServerArgs(a=1, ...)` (up to 0.5.16) or `server_args={'a': 1, ...}`."""
    dict_form = SERVER_ARGS not in message
    marker = SERVER_ARGS_DICT if dict_form else SERVER_ARGS
    start = message.index(marker)
    body = message[start + len(marker) :]
    items, end = _split_top_level(body)
    args: dict[str, ArgValue] = {}
    for item in items:
        key, sep, raw = item.strip().partition(": " if dict_form else "=")
        if dict_form:
            quoted, name = _literal(key)
            if not quoted or not isinstance(name, str):
                continue
            key = name
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


def parse_init(message: str) -> DraftRunnerInit | None:
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
        algorithm=match.group(1).upper(),
        variant=match.group(2),
        text=text,
        params=MappingProxyType(params),
    )


_DEPRECATED_RE = re.compile(
    r"'(--[\w-]+)' is deprecated and will be removed in a future release\."
    r"(?: Use '([^']+)' instead\.)?"
)


def deprecation_warning(message: str) -> str | None:
    """`'--disable-cuda-graph' is deprecated ... Use '…' instead.` (0.5.16 on) as printed, with
    no header or colour; None for any other line."""
    if "is deprecated and will be removed" not in message:
        return None
    match = _DEPRECATED_RE.search(message)
    return None if match is None else match.group(0)
