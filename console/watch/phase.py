"""What a start-up line says the server is doing: the phase a crash is reported in.

"illegal memory access during CUDA graph capture" and "… while decoding" are different
findings (the first is the budget > 8 graph-capture bug, the second a runtime fault), so both
a live rollout (console/tuning/invocation.py) and a package's journal excerpt (the findings
report) name the phase the same way, from the same parsed lines.

Pure: no I/O, no Textual.
"""

from __future__ import annotations

from collections.abc import Iterable

from console.watch.sglang import (
    DecodeBatch,
    GraphCapture,
    KVCacheAllocated,
    ServerReady,
    WeightLoad,
    parse_line,
)


def phase_of(message: str) -> str | None:
    """What a start-up line says the server is doing now, in words, or None."""
    parsed = parse_line(message)
    if isinstance(parsed, WeightLoad):
        return "loading weights" if parsed.phase == "begin" else "weights loaded"
    if isinstance(parsed, KVCacheAllocated):
        return "allocating KV cache"
    if isinstance(parsed, GraphCapture):
        graph = f"{parsed.device.upper()} graph capture"
        return graph if parsed.phase == "begin" else f"after {graph}"
    if isinstance(parsed, ServerReady):
        return "serving"
    if isinstance(parsed, DecodeBatch):
        return "decoding"
    return None


def last_phase(messages: Iterable[str], default: str = "starting") -> str:
    """The phase after these lines, in order: the last one that names a phase."""
    phase = default
    for message in messages:
        phase = phase_of(message) or phase
    return phase
