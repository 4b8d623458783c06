"""Hundreds of hosts in one console: the real app (headless) over 200 simulated hosts, and the
raw OpenSSH client over the same hosts in the same run.

    python3 -m bench.hundreds [--hosts 200] [--budget 32] [--groups 10] [--idle 20]
                              [--stream 20] [--rate 50] [--keys 15] [--no-raw]
                              [--on-demand] [--pages 5] [--keepalive 15]

Measured in this process (the app and its engine thread; the simulated hosts run in their own
process, `specops demo --serve`), with the hosts spread over `--groups` inventory groups:
the first painted frame with every host's row; the time until every row says `connected`
(at most `--budget` connection attempts in flight), the most attempts seen in flight, and
the time until every row also shows its unit's state (all hosts shown);
CPU (user+system, share of one core) and RSS while the fleet is quiet, in profile order and
again grouped and sorted by tok/s (the order is then recomputed every second); then, while
`--stream` hosts each log `--rate` decode lines a second, keypress → repaint p50 / p99 for
host selection (`1`–`9`), sort (`o`), group (`g`) and a filter applied (`F`, text, enter).

`--on-demand` measures the app a second time, in the same run over the same hosts, with
`follow = "on-demand"`: the first page's hosts connected and showing their unit, how many
hosts are connected once it settles (the rows on screen), the same quiet CPU and RSS, the
time from `pagedown` in the fleet table to every row of the new page showing `connected`
and its unit (`--pages` times), and the same keys.

The raw row: `ssh HOST journalctl -u UNIT -n 0` for every host, `--budget` at once (the
connecting), then one `ssh HOST journalctl -u UNIT -f -o cat` per host, their CPU and RSS
summed over the same quiet window: what following every host with OpenSSH alone costs.
Both clients send SSH keepalives every `--keepalive` s (default: a profile's, 15 s; the
demo's own profiles say 5 s, so that a host taken off the network is noticed quickly).
Numbers only.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from bench.harness import SimServer, percentile, report, rss_mb, sim_fleet
from console.app import SpecopsApp
from console.fleet.fleet import Fleet
from console.hosts.profiles import Profile, SSHConfig, load_fleet
from console.local.settings import CONNECT_BUDGET
from widgets.host_table import HostTable
from widgets.journal_view import JournalView, PromptInput

CLK_TCK = 100  # os.sysconf("SC_CLK_TCK") on Linux


def grouped(profiles: list[Profile], groups: int) -> list[Profile]:
    """The simulated hosts as an inventory would list them: `rack-N` groups under `gpu`."""
    if groups <= 0:
        return profiles
    return [
        p.model_copy(update={"groups": ("gpu", f"rack-{i % groups + 1:02d}")})
        for i, p in enumerate(profiles)
    ]


def with_keepalive(profiles: list[Profile], seconds: float) -> list[Profile]:
    """The hosts with SSH keepalives every `seconds` (the demo's profiles say 5 s, so that
    a host taken off the network is noticed quickly; a profile's default is 15 s)."""
    return [
        p.model_copy(update={"ssh": p.ssh.model_copy(update={"keepalive_interval_s": seconds})})
        for p in profiles
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


def page_ready(table: HostTable) -> bool:
    """Every row on screen says `connected` and shows its unit's state."""
    rows = [table.rows_by_name[n] for n in table.rows_on_screen()]
    return bool(rows) and all(r.connected and r.status for r in rows)


async def _pages(app: SpecopsApp, pilot: Any, table: HostTable, pages: int) -> list[float]:
    """`pagedown` in the fleet table → every row of the new page connected with its unit (s)."""
    table.focus()
    await pilot.pause()
    samples: list[float] = []
    for _ in range(pages):
        before = table.rows_on_screen()
        t0 = time.monotonic()
        app.simulate_key("pagedown")
        while table.rows_on_screen() == before and time.monotonic() - t0 < 5:
            await pilot.pause(0.005)
        while not page_ready(table) and time.monotonic() - t0 < 60:
            await pilot.pause(0.005)
        samples.append(time.monotonic() - t0)
        await pilot.pause(1.0)
    app.query_one(JournalView).focus()
    return samples


async def measure(
    sim: SimServer, args: argparse.Namespace, profiles: list[Profile], on_demand: bool = False
) -> dict[str, Any]:
    hosts = len(profiles)
    t0 = time.monotonic()
    fleet = Fleet(profiles, history=0, connect_budget=args.budget, on_demand=on_demand)
    app = SpecopsApp(fleet)
    client = "specops app, on demand" if on_demand else "specops app"
    row: dict[str, Any] = {"client": client, "hosts": hosts, "budget": args.budget}
    row["keepalive_s"] = args.keepalive
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

        def shown() -> int:  # connected, and the unit's state in its row
            return sum(1 for r in table.rows_by_name.values() if r.connected and r.status)

        if on_demand:  # the first page: the rows on screen
            while not page_ready(table) and time.monotonic() - t0 < 300:
                await pilot.pause(0.01)
            row["first_page_s"] = time.monotonic() - t0
        else:
            while connected() < hosts and time.monotonic() - t0 < 300:
                await pilot.pause(0.1)
            row["all_connected_s"] = time.monotonic() - t0
            while shown() < hosts and time.monotonic() - t0 < 300:
                await pilot.pause(0.1)
            row["all_status_s"] = time.monotonic() - t0
        row["connect_peak"] = fleet.connect_budget.peak
        await pilot.pause(5.0)  # first status reads and journal catch-up settle
        row["connected"] = sum(bool(s.started) for s in fleet.sessions.values())
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
        if on_demand:
            await pilot.pause(1.0)
            pages = await _pages(app, pilot, table, args.pages)
            row["page_down_p50_s"] = percentile(pages, 50)
            row["page_down_max_s"] = max(pages)
            row["connected_after_pages"] = sum(bool(s.started) for s in fleet.sessions.values())
            table.move_cursor(row=0)  # back to the top, as the keys start
            await pilot.pause(1.0)

        streaming = sim.profiles[: args.stream]
        count = int(args.rate * (args.keys * 4 + 15))
        emitters = [
            asyncio.create_task(asyncio.to_thread(sim.emit, p, args.rate, count)) for p in streaming
        ]
        quiet_at = time.monotonic() + count / args.rate + 2.0
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
    # The hosts go on logging what they were asked to: the next measurement starts quiet.
    await asyncio.sleep(max(0.0, quiet_at - time.monotonic()))
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
    row["keepalive_s"] = args.keepalive
    # The same keepalives as specops's: an idle SSH session costs little else.
    alive = ["-o", f"ServerAliveInterval={args.keepalive:g}", "-o", "ServerAliveCountMax=3"]
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
            sim.ssh_argv(
                p, ["journalctl", "-u", p.service.unit, "-f", "-o", "cat", "-n", "0"], alive
            ),
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
    "keepalive_s",
    "first_paint_s",
    "all_connected_s",
    "all_status_s",
    "first_page_s",
    "connected",
    "connect_peak",
    "idle_cpu_pct",
    "arranged_idle_cpu_pct",
    "rss_mb",
    "page_down_p50_s",
    "page_down_max_s",
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


def _child(sim: SimServer, mode: str) -> dict[str, Any]:
    """This benchmark run again in a child process for one app (`--app MODE`)."""
    argv = [sys.executable, "-m", "bench.hundreds", *sys.argv[1:], "--app", mode]
    argv += ["--sim", str(sim.directory)]
    done = subprocess.run(argv, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"bench.hundreds --app {mode} failed:\n{done.stderr[-4000:]}")
    line = next(ln for ln in done.stdout.splitlines() if ln.startswith("ROW "))
    row: dict[str, Any] = json.loads(line[4:])
    return row


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
    parser.add_argument(
        "--on-demand", action="store_true", help="also measure follow = on-demand, same run"
    )
    parser.add_argument("--pages", type=int, default=5, help="page-downs timed (on demand)")
    parser.add_argument(
        "--keepalive",
        type=float,
        default=SSHConfig.model_fields["keepalive_interval_s"].default,
        help="SSH keepalive interval, s, for both clients (default: a profile's default)",
    )
    parser.add_argument("--app", choices=("all", "on-demand"), help=argparse.SUPPRESS)
    parser.add_argument("--sim", metavar="DIR", help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.stream = min(args.stream, args.hosts)
    if args.app is not None:  # one app, in this process, over the fleet the parent serves
        served = SimServer(Path(args.sim), None, load_fleet(Path(args.sim) / "profiles"))
        profiles = with_keepalive(grouped(served.profiles, args.groups), args.keepalive)
        row = asyncio.run(measure(served, args, profiles, on_demand=args.app == "on-demand"))
        print("ROW " + json.dumps(row), flush=True)
        return
    with sim_fleet(hosts=args.hosts, decode_interval_s=3600) as sim:
        if args.on_demand:
            # Each app in a process of its own: its RSS is its own, not the first one's too.
            rows = [_child(sim, mode) for mode in ("all", "on-demand")]
        else:
            profiles = with_keepalive(grouped(sim.profiles, args.groups), args.keepalive)
            rows = [asyncio.run(measure(sim, args, profiles))]
        if not args.no_raw:
            rows.append(raw(sim, args))
    for row in rows:
        row.update(stream=args.stream, rate=args.rate, groups=args.groups)
    title = (
        f"{args.hosts} simulated hosts: the headless app vs OpenSSH alone "
        f"(keys while {args.stream} hosts log {args.rate:g} lines/s each)"
    )
    load = os.getloadavg()
    report("hundreds", title, COLUMNS, rows, load)
    apps = [r for r in rows if r["client"].startswith("specops")]
    report("hundreds_keys", "keypress → repaint, the app", KEY_COLUMNS, apps, load)


if __name__ == "__main__":
    main()
