"""A change is good only when it stays up: the soak window after the first decode line.

On the B300 `budget=16` with CUDA graphs answered the smoke test, logged an accept length of
6.04 — and died 1.5 s later in `cuda_graph_runner.replay`; other settings die minutes later
(cuBLAS once more than 128 requests run, OOM when the KV cache fills). So after the smoke test
a rollout keeps watching the new invocation for `service.soak_s`: the same InvocationID,
NRestarts unchanged, no crash signature in its journal, and `/health` still 200 at the end.
Only then is the configuration a *last good* one.

This module holds the loop's timing (a countdown with the live accept length, checks every
`poll_s` and at once when the journal says something) and how a failure's moment is named:
`capture` (CUDA graph capture), `startup` (before ready) or `soak` (after ready).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from console.hosts import clock as clocks
from console.hosts.clock import SYSTEM, Clock
from console.tuning.invocation import InvocationWatch

STAGES = ("capture", "startup", "soak")


def stage_of(phase: str | None, ready: bool) -> str:
    """The stage a failure happened in, from the watch's phase and whether /health was 200."""
    if ready:
        return "soak"
    if phase is not None and "graph capture" in phase and not phase.startswith("after"):
        return "capture"
    return "startup"


def countdown(remaining_s: float, accept_len: float | None) -> str:
    """What the operator sees while a soak runs: `42s left · accept len 6.04`."""
    accept = f" · accept len {accept_len:.2f}" if accept_len is not None else " · no decode yet"
    return f"{max(0.0, remaining_s):.0f}s left{accept}"


async def soak(
    watch: InvocationWatch,
    seconds: float,
    *,
    poll_s: float,
    check: Callable[[], Awaitable[None]],
    report: Callable[[str], None],
    clock: Clock = SYSTEM,
) -> None:
    """Hold for `seconds` of `clock`: `check()` (which raises on any sign of failure) runs
    every `poll_s`, at once when new journal lines arrive, and at the end; `report` gets the
    countdown."""
    deadline = clock.monotonic() + seconds
    next_poll = 0.0
    while True:
        now = clock.monotonic()
        if now >= deadline:
            await check()
            return
        if now >= next_poll:
            await check()
            report(countdown(deadline - clock.monotonic(), watch.last_accept_len))
            next_poll = clock.monotonic() + poll_s
        watch.changed.clear()
        await clocks.wait(
            clock, watch.changed, max(0.0, min(next_poll, deadline) - clock.monotonic())
        )
        if watch.signature is not None:
            await check()
