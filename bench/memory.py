"""Memory: RSS of the headless app after 1 M and 10 M journal lines (flat once buffers fill).

    python3 -m bench.memory [--checkpoints 1000000,10000000]

A host logs numbered decode lines flat out; the real app (fleet, follower, parser, metrics,
journal view with its ring buffers) ingests them. RSS is read at each checkpoint.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

from bench.harness import SEQ_RE, SimServer, report, rss_mb, sim_fleet
from console.app import SpecopsApp
from console.fleet.fleet import Fleet
from console.hosts.events import Event, JournalBatch


async def run(sim: SimServer, checkpoints: list[int], rate: float) -> list[dict[str, Any]]:
    profile = sim.profiles[0]
    app = SpecopsApp(Fleet(sim.profiles, history=0))
    highest = [0]

    def listen(event: Event) -> None:
        if isinstance(event, JournalBatch):
            for entry in reversed(event.entries):  # the host's own lines interleave
                match = SEQ_RE.search(entry.message)
                if match:
                    highest[0] = max(highest[0], int(match.group(1)))
                    return

    rows: list[dict[str, Any]] = []
    async with app.run_test(size=(160, 48)) as pilot:
        app.fleet.listen(listen)
        await app.engine.run(app.fleet.sessions[profile.name].wait_connected(20))
        await asyncio.sleep(1.0)
        rows.append({"lines": 0, "rss_mb": rss_mb(), "seconds": 0.0})
        t0 = time.monotonic()
        await asyncio.to_thread(sim.emit, profile, rate, checkpoints[-1])
        for target in checkpoints:
            while highest[0] < target:
                await pilot.pause(0.5)
            rows.append(
                {"lines": target, "rss_mb": rss_mb(), "seconds": round(time.monotonic() - t0, 1)}
            )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--checkpoints", default="1000000,10000000")
    parser.add_argument("--rate", type=float, default=20000, help="lines/s (0: flat out)")
    args = parser.parse_args()
    checkpoints = sorted(int(c) for c in args.checkpoints.split(","))
    with sim_fleet(hosts=1) as sim:
        rows = asyncio.run(run(sim, checkpoints, args.rate))
    for row in rows:
        row["rate"] = args.rate or "max"
    columns = ["rate", "lines", "seconds", "rss_mb"]
    report("memory", "RSS of the headless app while ingesting", columns, rows)


if __name__ == "__main__":
    main()
