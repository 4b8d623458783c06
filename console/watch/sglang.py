"""Parse the lines an SGLang server writes to its journal, in every release from 0.3.6 on.

Everything the console shows about a running server (acceptance length, throughput, CUDA-graph
state, load progress, crashes) is read from these lines, and SGLang has reshaped them in almost
every release (`reference/sglang.md` §1.3; the per-release fixtures in `tests/fixtures/sglang/`
come from the wheels' own format strings). So the parser is tolerant by construction: it
searches instead of anchoring (journald and Ray prefixes may come first, colour codes anywhere),
reads `key: value` fields by name rather than by position, and keeps fields it does not know.

It runs on every journal line, tens of thousands a second, so each recogniser sits behind a cheap
substring test and an ordinary line costs a handful of `in` checks.

The header is read in `console.watch.header`, batch lines in `console.watch.batches`, start-up
lines in `console.watch.startup`, crash signatures and a profile's `[[metrics]]` in
`console.watch.signatures`; everything stays importable from here, where DESIGN.md and existing
callers look for it.

Pure functions and dataclasses (the batch lines' ones are slots classes, immutable by
convention): no I/O, no Textual.
"""

from __future__ import annotations

from typing import TypeAlias

from console.watch.batches import (
    DecodeBatch,
    DecodeColumns,
    DecodeNumbers,
    PrefillBatch,
    decode_columns,
    decode_numbers,
    decode_numbers_of,
    parse_decode,
    parse_prefill,
)
from console.watch.header import Header, has_header, parse_header, strip_ansi
from console.watch.signatures import CRASH_SIGNATURES, CustomMetrics, crash_signature
from console.watch.startup import (
    READY,
    SERVER_ARGS,
    SERVER_ARGS_DICT,
    ArgValue,
    DraftRunnerInit,
    GraphCapture,
    KVCacheAllocated,
    ServerArgsLine,
    ServerReady,
    WeightLoad,
    deprecation_warning,
    is_kv_cache,
    parse_capture,
    parse_init,
    parse_kv_cache,
    parse_server_args,
    parse_weight_load,
)

__all__ = [
    "CRASH_SIGNATURES",
    "ArgValue",
    "CustomMetrics",
    "DecodeBatch",
    "DecodeColumns",
    "DecodeNumbers",
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
    "decode_columns",
    "decode_numbers",
    "decode_numbers_of",
    "deprecation_warning",
    "has_header",
    "parse_header",
    "parse_line",
]

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


def parse_line(message: str) -> ParsedLine | None:
    """Recognise one SGLang log line (or a whole multi-line record); None for anything else.

    Prefixes before the `[ts ...]` header (journald `short`, `(Worker pid=..)`) and colour codes
    are skipped, and a line without a header still parses, with `header` None.
    """
    message = strip_ansi(message)
    if "Decode batch" in message:
        return parse_decode(message)
    if "Prefill batch" in message:
        return parse_prefill(message)
    if "Capture " in message and " graph " in message:
        return parse_capture(message)
    if "Load weight " in message:
        return parse_weight_load(message)
    if "KV " in message and is_kv_cache(message):
        return parse_kv_cache(message)
    if READY in message:
        return ServerReady(parse_header(message[: message.index(READY)]))
    if SERVER_ARGS in message or SERVER_ARGS_DICT in message:
        return parse_server_args(message)
    if "Initialized D" in message:
        return parse_init(message)
    return None
