"""Hundreds of hosts in one console: the real app (headless) over 200 simulated hosts.

    python3 -m bench.hundreds [--hosts 200] [--idle 20] [--stream 20] [--rate 50] [--keys 10]

Measured in this process (the app and its engine thread; the simulated hosts run in their own
process, `specops demo --serve`): the first painted frame with every host's row; the time
until every row says `connected`; CPU (user+system, share of one core) and RSS while the
fleet is quiet; then keypress → repaint p50 / p99 while `--stream` hosts each log `--rate`
decode lines a second. Numbers only: nothing here asserts.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import time
from typing import Any

from bench.harness import SimServer, percentile, report, rss_mb, sim_fleet
from console.app import SpecopsApp
from console.fleet import Fleet
from widgets.host_table import HostTable


async def measure(
    sim: SimServer, idle_s: float, stream: int, rate: float, keys_s: float
) -> dict[str, Any]:
    hosts = len(sim.profiles)
    t0 = time.monotonic()
    app = SpecopsApp(Fleet(sim.profiles, history=0))
    row: dict[str, Any] = {"hosts": hosts}
    async with app.run_test(size=(160, 48)) as pilot:
        table = app.query_one(HostTable)
        while len(table.rows_by_name) < hosts:
            await pilot.pause(0.01)
        painted = asyncio.Event()
        app.call_after_refresh(painted.set)  # the first frame drawn with every row in it
        await painted.wait()
        row["first_paint_s"] = time.monotonic() - t0

        def connected() -> int:
            return sum(
                1
                for r in table.rows_by_name.values()
                if r.state is not None and r.state.state.value == "connected"
            )

        while connected() < hosts and time.monotonic() - t0 < 300:
            await pilot.pause(0.1)
        row["all_connected_s"] = time.monotonic() - t0
        row["connected"] = connected()
        await pilot.pause(5.0)  # first status reads and journal catch-up settle
        cpu0, w0 = time.process_time(), time.monotonic()
        await pilot.pause(idle_s)
        row["idle_cpu_pct"] = 100 * (time.process_time() - cpu0) / (time.monotonic() - w0)
        row["rss_mb"] = rss_mb()

        streaming = sim.profiles[:stream]
        count = int(rate * (keys_s + 5))
        emitters = [
            asyncio.create_task(asyncio.to_thread(sim.emit, p, rate, count)) for p in streaming
        ]
        samples: list[float] = []
        original = app.action_select_index
        repainted = asyncio.Event()
        pressed = [0.0]

        def after_refresh() -> None:
            samples.append((time.perf_counter() - pressed[0]) * 1000)
            repainted.set()

        def select(index: int) -> None:
            original(index)
            app.call_after_refresh(after_refresh)

        app.action_select_index = select  # type: ignore[method-assign]
        await pilot.pause(1.0)
        end = time.monotonic() + keys_s
        n = 0
        while time.monotonic() < end:
            n += 1
            repainted.clear()
            pressed[0] = time.perf_counter()
            app.simulate_key(str(1 + n % 9))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(repainted.wait(), 2.0)
            await pilot.pause(0.05)
        row["keys"] = len(samples)
        row["key_p50_ms"] = percentile(samples, 50)
        row["key_p99_ms"] = percentile(samples, 99)
        for task in emitters:
            task.cancel()
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--hosts", type=int, default=200)
    parser.add_argument("--idle", type=float, default=20.0, help="seconds of quiet fleet")
    parser.add_argument("--stream", type=int, default=20, help="hosts streaming during keys")
    parser.add_argument("--rate", type=float, default=50.0, help="lines/s per streaming host")
    parser.add_argument("--keys", type=float, default=10.0, help="seconds of key presses")
    args = parser.parse_args()
    with sim_fleet(hosts=args.hosts, decode_interval_s=3600) as sim:
        row = asyncio.run(
            measure(sim, args.idle, min(args.stream, args.hosts), args.rate, args.keys)
        )
    row.update(stream=args.stream, rate=args.rate)
    columns = [
        "hosts",
        "first_paint_s",
        "all_connected_s",
        "connected",
        "idle_cpu_pct",
        "rss_mb",
        "stream",
        "rate",
        "keys",
        "key_p50_ms",
        "key_p99_ms",
    ]
    report("hundreds", f"{args.hosts} simulated hosts in the headless app", columns, [row])


if __name__ == "__main__":
    main()
