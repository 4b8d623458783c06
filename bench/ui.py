"""Line → screen latency and keypress → repaint latency of the real app (headless).

    python3 -m bench.ui latency [--rate 1000] [--seconds 10]
    python3 -m bench.ui keys [--hosts 8] [--rate 5000] [--seconds 60]

latency: a host logs numbered lines stamped with their emission time; the app's journal
view records when each line is written to the widget (after batching). keys: every host
floods its journal while host-selection keys are pressed; each sample is the time from the
key event to the end of the next screen refresh after the action ran.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import time
from collections.abc import Callable
from typing import Any

from bench.harness import SEQ_RE, SimServer, percentile, report, sim_fleet
from console.app import SpecopsApp
from console.fleet.fleet import Fleet
from widgets.journal_view import JournalView


def instrument_view(view: JournalView, latencies: list[float]) -> None:
    original: Callable[..., Any] = view.write_lines

    def write_lines(lines: Any, *args: Any, **kwargs: Any) -> Any:
        now = time.time()
        for line in lines:
            match = SEQ_RE.search(line)
            if match:
                latencies.append(now - float(match.group(2)))
        return original(lines, *args, **kwargs)

    view.write_lines = write_lines  # type: ignore[method-assign]


async def wait_connected(app: SpecopsApp, hosts: int) -> None:
    sessions = app.fleet.sessions.values()
    await asyncio.gather(*(app.engine.run(s.wait_connected(20)) for s in sessions))
    await asyncio.sleep(1.0)
    del hosts


async def latency(sim: SimServer, rate: float, seconds: float) -> dict[str, Any]:
    profile = sim.profiles[0]
    app = SpecopsApp(Fleet(sim.profiles, history=0))
    samples: list[float] = []
    async with app.run_test(size=(160, 48)) as pilot:
        instrument_view(app.query_one(JournalView), samples)
        await wait_connected(app, 1)
        count = int(rate * seconds)
        await asyncio.to_thread(sim.emit, profile, rate, count)
        deadline = time.monotonic() + seconds * 3 + 10
        while len(samples) < count and time.monotonic() < deadline:
            await pilot.pause(0.1)
    ms = [s * 1000 for s in samples]
    return {
        "measure": "line → UI",
        "rate": rate,
        "lines": count,
        "seen": len(samples),
        "p50_ms": percentile(ms, 50),
        "p99_ms": percentile(ms, 99),
        "max_ms": max(ms) if ms else float("nan"),
    }


async def keys(sim: SimServer, rate: float, seconds: float) -> dict[str, Any]:
    app = SpecopsApp(Fleet(sim.profiles, history=0))
    samples: list[float] = []
    pressed = [0.0]
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_connected(app, len(sim.profiles))
        original = app.action_select_index

        repainted = asyncio.Event()

        def after_refresh() -> None:
            samples.append(time.perf_counter() - pressed[0])
            repainted.set()

        def select(index: int) -> None:
            original(index)
            app.call_after_refresh(after_refresh)

        app.action_select_index = select  # type: ignore[method-assign]
        count = int(rate * seconds)
        await asyncio.gather(*(asyncio.to_thread(sim.emit, p, rate, count) for p in sim.profiles))
        end = time.monotonic() + seconds
        n = 0
        while time.monotonic() < end:
            n += 1
            repainted.clear()
            pressed[0] = time.perf_counter()
            app.simulate_key(str(1 + n % len(sim.profiles)))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(repainted.wait(), 2)
            await pilot.pause(0.1)
    ms = [s * 1000 for s in samples]
    return {
        "measure": "key → repaint",
        "hosts": len(sim.profiles),
        "rate_per_host": rate,
        "presses": n,
        "samples": len(samples),
        "p50_ms": percentile(ms, 50),
        "p99_ms": percentile(ms, 99),
        "max_ms": max(ms) if ms else float("nan"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("mode", choices=["latency", "keys"])
    parser.add_argument("--hosts", type=int, default=8)
    parser.add_argument("--rate", type=float, default=None)
    parser.add_argument(
        "--seconds", type=float, default=None, help="latency: 10, keys: 60 (~350 presses)"
    )
    args = parser.parse_args()
    if args.mode == "latency":
        with sim_fleet(hosts=1) as sim:
            row = asyncio.run(latency(sim, args.rate or 1000.0, args.seconds or 10.0))
        columns = ["measure", "rate", "lines", "seen", "p50_ms", "p99_ms", "max_ms"]
        report("latency", "Emission → journal view (headless app)", columns, [row])
    else:
        with sim_fleet(hosts=args.hosts, load_s=0.3) as sim:
            row = asyncio.run(keys(sim, args.rate or 5000.0, args.seconds or 60.0))
        columns = ["measure", "hosts", "rate_per_host", "presses", "samples", "p50_ms", "p99_ms"]
        report("keys", "Keypress → repaint under load (headless app)", columns, [row])


if __name__ == "__main__":
    main()
