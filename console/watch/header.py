"""The header and prefixes of an SGLang log record: `[ts DP0 TP0 EP0]`, journald, Ray, colour.

Every recogniser in `console.watch.sglang` starts by finding where SGLang's own text begins, and
the journal assembler asks whether a line starts a new record. Both are here, apart from what
the lines say. Pure functions and frozen dataclasses: no I/O, no Textual.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from datetime import datetime

__all__ = ["Header", "has_header", "parse_header", "prefix_header", "strip_ansi"]

_TS = r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:\.\d{1,6})?"
# Any subset of DP, PP, ATTN_CP, MOE_DP, TP, EP in any order; unknown future ranks are kept too.
# 0.3.6 prints `DP-1` when data parallelism is off (`int(os.getenv("DP_RANK", -1))`).
_RANKS = r"(?: [A-Z][A-Z_]*-?\d+)*"
_HEADER_RE = re.compile(rf"\[(?P<ts>{_TS})(?P<ranks>{_RANKS})\]")
_RANK_RE = re.compile(r"([A-Z][A-Z_]*?)(-?\d+)")
# `journalctl -o short` (`Jun 01 12:00:00 gpu-host python3[12345]: `) or `-o short-iso`.
_JOURNAL_PREFIX = (
    r"(?:[A-Z][a-z]{2} [ \d]\d \d{2}:\d{2}:\d{2}(?:\.\d+)?"
    r"|\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:?\d{2})?)"
    r" \S+ [^\s\[:]+(?:\[\d+\])?: "
)
# Ray-style process prefix: `(Worker pid=123, ip=10.0.0.1) `.
# Ray-style process prefix: `(Worker pid=123, ip=10.0.0.1) `, `(SGLangEngine pid=42) `,
# `(pid=7)` or `(TPWorker pid=9, ip=10.0.0.1, node=gpu-3)`.
_WORKER_PREFIX = r"\((?:[\w.-]+ )?pid=\d+(?:[,\s][^)]*)?\)\s*"
# Colour SGLang, Ray and uvicorn print when stdout looks like a terminal (SGR and other CSI).
_ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
_HAS_HEADER_RE = re.compile(rf"(?:{_JOURNAL_PREFIX})?(?:{_WORKER_PREFIX})?\[{_TS}{_RANKS}\]")


@dataclass(frozen=True, slots=True)
class Header:
    """The `[2026-07-21 15:00:13 TP0 EP0]` prefix of an SGLang log record (shared: immutable)."""

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


@functools.lru_cache(maxsize=64)
def prefix_header(prefix: str) -> Header | None:
    """`parse_header` of the text before a batch line's name: the same few prefixes (one a
    second per rank) come back on every line of a flood, so they are remembered."""
    return parse_header(prefix)


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


def strip_ansi(message: str) -> str:
    """`message` without terminal colour codes (a no-op costing one `in` for plain lines)."""
    return _ANSI_RE.sub("", message) if "\x1b" in message else message
