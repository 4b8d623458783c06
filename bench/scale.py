"""Many idle hosts: CPU and memory of specops holding 64 connected, quiet hosts.

    python3 -m bench.scale [--hosts 64] [--seconds 30] [--decode-interval 3600]

Every host is connected, its journal followed and its unit polled, as in the TUI; the hosts
log nothing (a quiet fleet between experiments). With `--decode-interval 1` each host logs
one decode line a second instead, as a server under load does by default. CPU is this
process's user+system time over the window, as a share of one core.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

from bench.harness import report, rss_mb, sim_fleet
from console.fleet.fleet import Fleet


async def idle(profiles: list[Any], seconds: float) -> dict[str, Any]:
    fleet = Fleet(profiles, follow=True, history=0)
    fleet.start()
    connected = await asyncio.gather(*(s.wait_connected(60) for s in fleet.sessions.values()))
    await asyncio.sleep(5)  # let connection setup and first status reads settle
    cpu0, t0 = time.process_time(), time.monotonic()
    await asyncio.sleep(seconds)
    cpu, wall = time.process_time() - cpu0, time.monotonic() - t0
    rss = rss_mb()
    await fleet.stop()
    return {
        "hosts": len(profiles),
        "connected": sum(connected),
        "seconds": round(wall, 1),
        "cpu_pct_of_core": 100 * cpu / wall,
        "rss_mb": rss,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--hosts", type=int, default=64)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--decode-interval", type=float, default=3600.0, help="seconds")
    args = parser.parse_args()
    with sim_fleet(hosts=args.hosts, decode_interval_s=args.decode_interval) as sim:
        row = asyncio.run(idle(sim.profiles, args.seconds))
    row["decode_interval_s"] = args.decode_interval
    columns = ["hosts", "decode_interval_s", "connected", "seconds", "cpu_pct_of_core", "rss_mb"]
    report("scale", f"{args.hosts} idle connected hosts", columns, [row])


if __name__ == "__main__":
    main()
