"""Hundreds of hosts in one console: the real app (headless) over 200 simulated hosts, and the
raw OpenSSH client over the same hosts in the same run.

    python3 -m bench.hundreds [--hosts 200] [--budget 32] [--groups 10] [--idle 20]
                              [--stream 20] [--rate 50] [--keys 15] [--no-raw]

Measured in this process (the app and its engine thread; the simulated hosts run in their own
process, `specops demo --serve`), with the hosts spread over `--groups` inventory groups:
the first painted frame with every host's row; the time until every row says `connected`
(at most `--budget` connection attempts in flight), the most attempts seen in flight, and
the time until every row also shows its unit's state (all hosts shown);
CPU (user+system, share of one core) and RSS while the fleet is quiet, in profile order and
again grouped and sorted by tok/s (the order is then recomputed every second); then, while
`--stream` hosts each log `--rate` decode lines a second, keypress → repaint p50 / p99 for
host selection (`1`–`9`), sort (`o`), group (`g`) and a filter applied (`F`, text, enter).

The raw row: `ssh HOST journalctl -u UNIT -n 0` for every host, `--budget` at once (the
connecting), then one `ssh HOST journalctl -u UNIT -f -o cat` per host, their CPU and RSS
summed over the same quiet window: what following every host with OpenSSH alone costs.
Numbers only.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import contextlib
import subprocess
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from bench.harness import SimServer, percentile, report, rss_mb, sim_fleet
from console.app import SpecopsApp
from console.fleet import Fleet
from console.profiles import Profile
from console.settings import CONNECT_BUDGET
from widgets.host_table import HostTable
from widgets.journal_view import PromptInput

CLK_TCK = 100  # os.sysconf("SC_CLK_TCK") on Linux


def grouped(profiles: list[Profile], groups: int) -> list[Profile]:
    """The simulated hosts as an inventory would list them: `rack-N` groups under `gpu`."""
    if groups <= 0:
        return profiles
    return [
        p.model_copy(update={"groups": ("gpu", f"rack-{i % groups + 1:02d}")})
        for i, p in enumerate(profiles)
    ]


async def _keys(
    app: SpecopsApp,
    pilot: Any,
    seconds: float,
    target: object,
    method: str,
    press: Callable[[int], str],
    before: Callable[[int], Awaitable[None]] | None = None,
) -> list[float]:
    """Keypress → the repaint after `target.method` (what the key does) ran, in ms, for
    `seconds` of presses; `before` readies each press (opens the filter prompt)."""
    samples: list[float] = []
    original = getattr(target, method)
    repainted = asyncio.Event()
    pressed = [0.0]

    def after_refresh() -> None:
        samples.append((time.perf_counter() - pressed[0]) * 1000)
        repainted.set()

    def timed(*args: Any) -> None:
        original(*args)
        app.call_after_refresh(after_refresh)

    setattr(target, method, timed)
    end = time.monotonic() + seconds
    n = 0
    try:
        while time.monotonic() < end:
            n += 1
            if before is not None:
                await before(n)
            repainted.clear()
            pressed[0] = time.perf_counter()
            app.simulate_key(press(n))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(repainted.wait(), 2.0)
            await pilot.pause(0.05)
    finally:
        delattr(target, method)  # the class's method again
    return samples


FILTERS = ("group=rack-03", "state=up name~gpu1", "", "group=gpu state=active", "")


async def measure(
    sim: SimServer, args: argparse.Namespace, profiles: list[Profile]
) -> dict[str, Any]:
    hosts = len(profiles)
    t0 = time.monotonic()
    fleet = Fleet(profiles, history=0, connect_budget=args.budget)
    app = SpecopsApp(fleet)
    row: dict[str, Any] = {"client": "specops app", "hosts": hosts, "budget": args.budget}
    async with app.run_test(size=(160, 48)) as pilot:
        table = app.query_one(HostTable)
        while len(table.rows_by_name) < hosts:
            await pilot.pause(0.01)
        painted = asyncio.Event()
        app.call_after_refresh(painted.set)  # the first frame drawn with every row in it
        await painted.wait()
        row["first_paint_s"] = time.monotonic() - t0

        def connected() -> int:
            return sum(1 for r in table.rows_by_name.values() if r.connected)

        while connected() < hosts and time.monotonic() - t0 < 300:
            await pilot.pause(0.1)
        row["all_connected_s"] = time.monotonic() - t0
        row["connected"] = connected()
        row["connect_peak"] = fleet.connect_budget.peak

        def shown() -> int:  # connected, and the unit's state in its row
            return sum(1 for r in table.rows_by_name.values() if r.connected and r.status)

        while shown() < hosts and time.monotonic() - t0 < 300:
            await pilot.pause(0.1)
        row["all_status_s"] = time.monotonic() - t0
        await pilot.pause(5.0)  # first status reads and journal catch-up settle
        cpu0, w0 = time.process_time(), time.monotonic()
        await pilot.pause(args.idle)
        row["idle_cpu_pct"] = 100 * (time.process_time() - cpu0) / (time.monotonic() - w0)
        row["rss_mb"] = rss_mb()

        table.set_grouped(True)
        while table.sort_column != "tok/s":
            table.cycle_sort()
        await pilot.pause(2.0)
        cpu0, w0 = time.process_time(), time.monotonic()
        await pilot.pause(args.idle / 2)
        row["arranged_idle_cpu_pct"] = 100 * (time.process_time() - cpu0) / (time.monotonic() - w0)
        table.set_grouped(False)
        while table.sort_column != "#":
            table.cycle_sort()

        streaming = sim.profiles[: args.stream]
        count = int(args.rate * (args.keys * 4 + 15))
        emitters = [
            asyncio.create_task(asyncio.to_thread(sim.emit, p, args.rate, count)) for p in streaming
        ]
        await pilot.pause(1.0)
        prompt = app.query_one("#fleet-filter", PromptInput)

        async def open_filter(n: int) -> None:  # `F`, then the text typed (not timed)
            app.simulate_key("F")
            await pilot.pause()
            prompt.value = FILTERS[n % len(FILTERS)]

        keys = {
            "select": (app, "action_select_index", lambda n: str(1 + n % 9), None),
            "sort": (app, "action_sort_hosts", lambda n: "o", None),
            "group": (app, "action_group_hosts", lambda n: "g", None),
            "filter": (table, "set_filter", lambda n: "enter", open_filter),
        }
        for name, (target, method, press, before) in keys.items():
            samples = await _keys(app, pilot, args.keys, target, method, press, before)
            row[f"{name}_keys"] = len(samples)
            row[f"{name}_p50_ms"] = percentile(samples, 50)
            row[f"{name}_p99_ms"] = percentile(samples, 99)
        for task in emitters:
            task.cancel()
    return row


def _cpu_s(pid: int) -> float:
    with contextlib.suppress(OSError):
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime, stime
    return 0.0


def raw(sim: SimServer, args: argparse.Namespace) -> dict[str, Any]:
    """OpenSSH alone: connect to every host (`--budget` at once), then follow every journal."""
    profiles = sim.profiles
    row: dict[str, Any] = {"client": "raw OpenSSH", "hosts": len(profiles), "budget": args.budget}
    t0 = time.monotonic()

    def once(profile: Profile) -> int:  # the cheapest command the simulated host answers
        argv = sim.ssh_argv(profile, ["journalctl", "-u", profile.service.unit, "-n", "0"])
        return subprocess.run(argv, capture_output=True, timeout=60).returncode

    with concurrent.futures.ThreadPoolExecutor(args.budget) as pool:
        codes = list(pool.map(once, profiles))
    row["all_connected_s"] = time.monotonic() - t0
    row["connected"] = codes.count(0)
    followers = [
        subprocess.Popen(
            sim.ssh_argv(p, ["journalctl", "-u", p.service.unit, "-f", "-o", "cat", "-n", "0"]),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for p in profiles
    ]
    try:
        time.sleep(5.0)
        cpu0, w0 = sum(_cpu_s(f.pid) for f in followers), time.monotonic()
        time.sleep(args.idle)
        cpu = sum(_cpu_s(f.pid) for f in followers) - cpu0
        row["idle_cpu_pct"] = 100 * cpu / (time.monotonic() - w0)
        row["rss_mb"] = sum(rss_mb(f.pid) for f in followers if f.poll() is None)
        row["connected"] = min(row["connected"], sum(f.poll() is None for f in followers))
    finally:
        for follower in followers:
            follower.terminate()
        for follower in followers:
            with contextlib.suppress(subprocess.TimeoutExpired):
                follower.wait(5)
    return row


COLUMNS = [
    "client",
    "hosts",
    "budget",
    "first_paint_s",
    "all_connected_s",
    "connected",
    "connect_peak",
    "all_status_s",
    "idle_cpu_pct",
    "arranged_idle_cpu_pct",
    "rss_mb",
]
KEY_COLUMNS = [
    "client",
    "stream",
    "rate",
    "select_keys",
    "select_p50_ms",
    "select_p99_ms",
    "sort_keys",
    "sort_p50_ms",
    "sort_p99_ms",
    "group_keys",
    "group_p50_ms",
    "group_p99_ms",
    "filter_keys",
    "filter_p50_ms",
    "filter_p99_ms",
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--hosts", type=int, default=200)
    parser.add_argument("--budget", type=int, default=CONNECT_BUDGET, help="connects at once")
    parser.add_argument("--groups", type=int, default=10, help="inventory groups (0: none)")
    parser.add_argument("--idle", type=float, default=20.0, help="seconds of quiet fleet")
    parser.add_argument("--stream", type=int, default=20, help="hosts streaming during keys")
    parser.add_argument("--rate", type=float, default=50.0, help="lines/s per streaming host")
    parser.add_argument("--keys", type=float, default=10.0, help="seconds of each kind of key")
    parser.add_argument("--no-raw", action="store_true", help="skip the OpenSSH baseline")
    args = parser.parse_args()
    args.stream = min(args.stream, args.hosts)
    with sim_fleet(hosts=args.hosts, decode_interval_s=3600) as sim:
        rows = [asyncio.run(measure(sim, args, grouped(sim.profiles, args.groups)))]
        if not args.no_raw:
            rows.append(raw(sim, args))
    for row in rows:
        row.update(stream=args.stream, rate=args.rate, groups=args.groups)
    title = (
        f"{args.hosts} simulated hosts: the headless app vs OpenSSH alone "
        f"(keys while {args.stream} hosts log {args.rate:g} lines/s each)"
    )
    report("hundreds", title, COLUMNS, rows)
    report("hundreds_keys", "keypress → repaint, the app", KEY_COLUMNS, rows[:1])


if __name__ == "__main__":
    main()
