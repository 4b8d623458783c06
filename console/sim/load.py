"""Synthetic journal load for benchmarks and tests: numbered SGLang decode lines at a rate.

Reached through the simulated host's own command `specops-sim-emit --rate R --count N`,
which is not part of the console's remote vocabulary: benchmarks send it, the console never
does. Every line is a real decode line (specops parses it and charts its accept len) with a
last field ` seq=N t=EPOCH` that is not `key: value`, so both specops and a
raw `journalctl -o cat | grep 'accept len'` pipeline see it, and receivers can check order,
loss and emission-to-delivery latency.
"""

from __future__ import annotations

import argparse
import asyncio
import time

from console.sim.journal import SimJournal

TICK_S = 0.005


def decode_line(seq: int, now: float) -> str:
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(now))
    return (
        f"[{stamp} TP0] Decode batch, #running-req: 32, #token: 41230, token usage: 0.02, "
        f"accept len: {4.3 + (seq % 20) / 100:.2f}, accept rate: 0.43, cuda graph: True, "
        f"gen throughput (token/s): 1650.00, #queue-req: 0, seq={seq} t={now:.6f}"
    )


async def emit(journal: SimJournal, unit: str, rate: float, count: int, start: int = 1) -> None:
    """Log `count` numbered lines at `rate` lines/s (0: as fast as possible)."""
    started = time.monotonic()
    sent = 0
    while sent < count:
        if rate > 0:
            due = min(count, int((time.monotonic() - started) * rate) + 1)
        else:
            due = min(count, sent + 2000)
        while sent < due:
            now = time.time()
            journal.append(unit, decode_line(start + sent, now), _PID="4242")
            sent += 1
        await asyncio.sleep(TICK_S if rate > 0 else 0)


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="specops-sim-emit", exit_on_error=False)
    parser.add_argument("--rate", type=float, default=1000.0)
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--start", type=int, default=1)
    parser.add_argument("--unit", default="sglang-k26-ddtree.service")
    return parser.parse_args(argv)
