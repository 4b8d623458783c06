"""Crash signatures and a profile's own metric patterns: the other things a line can say.

`console.watch.sglang` reads what a healthy server reports; this module recognises the lines that
mean it is dying (`reference/sglang.md` §2.3: illegal memory access, cuBLAS failures, OOM,
NCCL watchdogs, scheduler exceptions, SIGQUIT) and the private lines a profile charts with
`[[metrics]]` (e.g. `DDTREE metrics ... recent_al=4.1`). Both run on every journal line, so
each is a cheap substring gate in front of the regular expressions.

Pure functions: no I/O, no Textual.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from console.hosts.profiles import MetricPattern

__all__ = ["CRASH_SIGNATURES", "CustomMetrics", "crash_signature", "record_signature"]

_ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")

# --- Crash signatures ------------------------------------------------------------------------

CRASH_SIGNATURES: tuple[tuple[str, re.Pattern[str]], ...] = (
    # Most specific first: one line often matches several (an NCCL watchdog line carries the
    # CUDA error that killed it), and the first match names the crash.
    (
        "nccl_watchdog",
        re.compile(
            r"Process group watchdog thread terminated"
            r"|Watchdog caught collective operation timeout"
            r"|ProcessGroupNCCL's watchdog got stuck"
        ),
    ),
    ("illegal_memory_access", re.compile(r"an illegal memory access was encountered")),
    ("cublas", re.compile(r"CUBLAS_STATUS_[A-Z_]+")),
    (
        "oom",
        # `Decode out of memory happened. #retracted_reqs` (0.3.6/0.4.1) is a retraction, no crash
        re.compile(
            r"OutOfMemoryError|CUDA out of memory|Not enough memory"
            r"|Decode out of memory(?! happened)"
        ),
    ),
    ("segfault", re.compile(r"Fatal Python error: Segmentation fault|Segmentation fault \(core")),
    # `Capture cuda graph failed` (0.3 on), `Capture CPU graph failed` (0.5.3 on), `Capture
    # prefill CUDA graph failed` (0.5.16 on), `Capture frozen-KV MTP cuda graph failed`, and the
    # role/stage-named captures of 0.5.16+ (`Capture target verify CUDA graph ...`).
    (
        "capture_failed",
        re.compile(
            r"Capture (?:[\w-]+ ){0,4}(?:cuda|CUDA|cpu|CPU|npu|NPU|musa|MUSA|xpu|XPU) graph failed"
            r"|Capture single-CG draft extend failed"
        ),
    ),
    ("cuda_error", re.compile(r"CUDA error: ")),
    ("nccl_error", re.compile(r"NCCL error|ncclUnhandledCudaError|ncclSystemError")),
    # 0.3.6 logs the scheduler's traceback bare, right after the header.
    (
        "scheduler_exception",
        re.compile(r"Scheduler hit an exception|\d\] Traceback \(most recent call last\)"),
    ),
    ("detokenizer_exception", re.compile(r"DetokenizerManager hit an exception")),
    # `Watchdog timeout (self.watchdog_timeout=300)` up to 0.5.6; `Scheduler watchdog timeout
    # (self.watchdog_timeout=300, self.soft=False)` from 0.5.10. A soft watchdog only dumps.
    ("watchdog_timeout", re.compile(r"[Ww]atchdog timeout \((?![^)]*soft=True)")),
    ("health_check_failed", re.compile(r"Health check failed\. Server couldn't get a response")),
    ("subprocess_crashed", re.compile(r"crashed with exit code")),
    (
        "sigquit",
        re.compile(r"Received sigquit|SIGQUIT received|Received SIGQUIT from scheduler"),
    ),
)
"""(name, pattern) of every line that means the server died or is about to.

`KV cache pool is full. Retract requests` is deliberately absent: it is a warning SGLang
recovers from.
"""

# Every signature contains one of these substrings. Testing them costs a fraction of one
# search with the union of the table (an alternation is tried at every position of the line),
# and only a line that passes walks the table. Each `in` costs about the same whatever the
# needle, so they are as few as cover the table: a new signature needs one of these (or a new
# one) in every alternative, and the per-release crash fixtures check that each passes the gate.
_CRASH_NEEDLES: tuple[bytes, ...] = tuple(
    needle.encode()
    for needle in (
        "emory",  # illegal memory access, OutOfMemoryError, out of memory, Not enough memory
        "rror",  # CUDA error, NCCL error, ncclUnhandledCudaError, ncclSystemError
        "failed",  # Capture ... graph failed, Capture single-CG ... failed, Health check failed
        "atchdog",  # NCCL watchdogs, [Ww]atchdog timeout
        "xception",  # Scheduler / DetokenizerManager hit an exception
        "Traceback",  # 0.3.6's bare scheduler traceback
        "CUBLAS",
        "fault",  # Segmentation fault
        "crashed",
        "eceived",  # Received sigquit, SIGQUIT received, Received SIGQUIT from scheduler
    )
)


_DIGITS = b"0123456789"
CLEAN_KEPT = 256
"""Layouts of needle-free lines remembered (a server's flood repeats a handful)."""
CLEAN_CHARS = 1024
"""Lines longer than this are not remembered, so the memory stays bounded (≤ 256 KiB)."""
_clean: set[bytes] = set()
"""Lines with their digits taken out (a line's layout) that hold no needle."""


def crash_signature(message: str) -> str | None:
    """The name of the first `CRASH_SIGNATURES` entry found in `message`, else None."""
    if "\x1b" in message:
        message = _ANSI_RE.sub("", message)
    # No needle holds a digit, so taking the digits out keeps every needle a line holds: a line
    # whose layout (the rest) is known to hold none holds none. A flood's lines differ only in
    # their numbers, so most are one bytes.translate and a set lookup, not ten scans.
    # (UTF-8: a needle's ASCII bytes never occur inside another character's encoding.)
    layout = message.encode("utf-8", "surrogatepass").translate(None, _DIGITS)
    if layout in _clean:
        return None
    for needle in _CRASH_NEEDLES:
        if needle in layout:
            break
    else:
        if len(layout) <= CLEAN_CHARS:
            if len(_clean) >= CLEAN_KEPT:
                _clean.clear()
            _clean.add(layout)
        return None
    for name, pattern in CRASH_SIGNATURES:
        if pattern.search(message) is not None:
            return name
    return None


# Lines that report that something else went wrong; the cause, when a record also carries it,
# names the crash better.
_WRAPPERS = frozenset(
    {"scheduler_exception", "detokenizer_exception", "subprocess_crashed", "sigquit"}
)


def record_signature(lines: Iterable[str]) -> str | None:
    """The crash a multi-line record names.

    A record that starts with a cause (a watchdog timeout, a segfault) is named by its first
    line: the stack dumps and the SIGQUIT after a hang are its consequences. A record that
    starts with a wrapper (`Scheduler hit an exception:`) is named by the most specific
    signature anywhere in it, usually the CUDA error at the end of the traceback.
    """
    lines = list(lines)
    if not lines:
        return None
    first = crash_signature(lines[0])
    if first is not None and first not in _WRAPPERS:
        return first
    return crash_signature("\n".join(lines))


# --- User-defined metrics ------------------------------------------------------------------


_CONTEXTUAL = re.compile(r"\\[AZ]|\(\?[=!<>]|[*+?}]\+")
"""What can match a line alone and not within lines joined by newlines: `\\A`, `\\Z`,
lookarounds, atomic groups, possessive quantifiers. (`^` and `$` match at every line with
MULTILINE, `\\b` sees a newline as the line's edge, and anything else only matches more.)"""


def _gate(regex: str) -> re.Pattern[str] | None:
    """The pattern for searching many lines joined by newlines (every match a line alone has,
    the joined text has too); None when the pattern has something that may differ."""
    if _CONTEXTUAL.search(regex) is not None:
        return None
    return re.compile(regex, re.MULTILINE)


class CustomMetrics:
    """The `[[metrics]]` patterns of a profile, compiled once and matched against each line.

    Each pattern's `(?P<value>...)` group must read as a number; a line where it does not is
    skipped rather than raising, because the pattern is the user's and the line is the server's.
    """

    __slots__ = ("_gates", "_patterns")

    def __init__(self, patterns: Iterable[MetricPattern]) -> None:
        self._patterns = tuple((p.name, re.compile(p.regex)) for p in patterns)
        gates = [_gate(p.regex) for p in patterns]
        self._gates = None if None in gates else tuple(g for g in gates if g is not None)
        """One search per pattern over a slice's lines joined, when every pattern allows it."""

    def may_match(self, messages: list[str]) -> bool:
        """False when no pattern matches any of these lines (`match` of each would find
        nothing); True when one may. A flood's slice is one search a pattern, not one a line."""
        if self._gates is None:
            return True
        joined = "\n".join(messages)
        return any(gate.search(joined) is not None for gate in self._gates)

    @property
    def names(self) -> tuple[str, ...]:
        """The metric names, in profile order (a name may repeat with several patterns)."""
        return tuple(name for name, _ in self._patterns)

    def __len__(self) -> int:
        return len(self._patterns)

    def match(self, message: str) -> list[tuple[str, float]]:
        """`(name, value)` for every pattern found in `message`, in profile order."""
        found: list[tuple[str, float]] = []
        for name, pattern in self._patterns:
            match = pattern.search(message)
            if match is None:
                continue
            raw = match.group("value")
            if raw is None:
                continue
            try:
                value = float(raw.strip().rstrip("%"))
            except ValueError:
                continue
            if math.isfinite(value):
                found.append((name, value))
        return found
