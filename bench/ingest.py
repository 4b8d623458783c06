"""Ingest: lines/s delivered, client CPU per line, and loss — specops vs raw pipeline.

The raw baseline is what operators run today:
    ssh host journalctl -u UNIT -f -o cat | grep --line-buffered -E '<profile patterns>'
specops runs its real engine (Fleet → HostSession → JournalFollower → filter + SGLang parse)
and, separately, the whole headless app (engine thread, inbox, journal view, metrics and
chart redraws), which counts a line when the journal view takes it. All follow the same
simulated hosts, one client after the other, for the same numbered lines; CPU is the client
process's own (both of the app's threads), or that of every ssh and grep. `cpu_us_line` is
that CPU time over the lines delivered (µs a line: less sensitive to a shared machine's load
than lines/s); `app_vs_engine` is the app's µs a line over the engine's at the same rate.

The benchmark's own count of the numbered lines (`Tally.see`) is not billed to any client:
raw's runs in this process, outside the ssh and grep measured, and specops's runs inside
the client's process, so its thread CPU time is measured there and taken out.
`tally_us_line` is what was taken out (add it back to compare with figures from before
this accounting, which billed it to specops only).

`host_busy` is the simulated hosts' process CPU over the same wall time (1.0: a core): a
flat-out run the host keeps near 1.0 is limited by the host, not by the client.

With `--hosts N` every host logs at the rate at once (N raw pipes; one specops client
following all N): `--hosts 8 --rates 5000` is the 8 hosts × 5k lines/s burst.

    python3 -m bench.ingest [--rates 1000,5000,20000,0] [--seconds 5] [--clients raw,engine,app]
                            [--hosts 1] [--name ingest]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import subprocess
import threading
import time
from collections.abc import Callable, Iterable

from bench.harness import SimServer, patterns_regex, report, sim_fleet
from console.app import SpecopsApp
from console.fleet.fleet import Fleet
from console.hosts.events import JournalBatch, JournalEntry
from console.hosts.profiles import Profile
from console.watch.journal import LineFilter
from widgets.journal_view import JournalView


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


class Tally:
    """The numbered lines each host's client received, and when the last one arrived."""

    def __init__(self, start: int, count: int, hosts: int = 1) -> None:
        self.seen: dict[str, set[int]] = {}
        self.last = start + count - 1
        self.hosts = hosts
        self.complete = 0
        self.first = 0.0
        """When the first numbered line arrived (monotonic)."""
        self.finish = 0.0
        self.done = threading.Event()
        self.cost = 0.0
        """Thread CPU seconds spent in `count` (taken out of the client's CPU time)."""

    def count(self, messages: Iterable[str], host: str = "") -> None:
        """`see` each message, timing the work (thread CPU) so it can be billed to no one."""
        started = time.thread_time()
        see = self.see
        for message in messages:
            see(message, host)
        self.cost += time.thread_time() - started

    def see(self, message: str, host: str = "") -> None:
        # rfind and int, not a regular expression: this is billed to the client measured.
        at = message.rfind(" seq=")
        if at < 0:
            return
        end = message.find(" ", at + 5)
        try:
            seq = int(message[at + 5 : end])
        except ValueError:
            return
        seen = self.seen.get(host)
        if seen is None:
            seen = self.seen[host] = set()
            self.first = self.first or time.monotonic()
        if seq in seen:
            return
        seen.add(seq)
        if seq == self.last:
            self.complete += 1
            if self.complete >= self.hosts:
                self.finish = time.monotonic()
                self.done.set()

    def timeout(self, rate: float, count: int) -> float:
        return max(60.0, count / max(rate, 1) * 3)


def count_batches(tally: Tally, profile: Profile) -> Callable[[object], None]:
    """A fleet listener counting the lines `specops tail` shows (the profile's patterns, as
    grep has them) of every journal batch."""
    accepts = LineFilter(profile.journal.patterns).accepts

    def listen(event: object) -> None:
        if isinstance(event, JournalBatch):
            tally.count([entry.message for entry in event.entries if accepts(entry)], event.host)

    return listen


def count_view(app: SpecopsApp, tally: Tally) -> None:
    """Count the app's lines as its journal view takes them from the inbox."""
    view = app.query_one(JournalView)
    take = view.add

    def add(host: str, records: Iterable[JournalEntry]) -> None:
        records = tuple(records)
        tally.count([record.message for record in records], host)
        take(host, records)

    view.add = add  # type: ignore[method-assign]


def row(
    client: str,
    rate: float,
    count: int,
    tally: Tally,
    start: int,
    seconds: float,
    cpu: float,
    host_cpu: float,
) -> dict[str, object]:
    """One result line: what arrived of lines start..start+count-1 on every host, how fast,
    at what cost (`cpu` without the tally's own), and how busy the simulated hosts were."""
    got = sum(len([s for s in seen if start <= s < start + count]) for seen in tally.seen.values())
    total = count * tally.hosts
    return {
        "client": client,
        "hosts": tally.hosts,
        "rate": rate or "max",
        "lines": total,
        "delivered": got,
        "lost": total - got,
        "lines_per_s": got / seconds,
        "cpu_us_line": (cpu - tally.cost) / max(got, 1) * 1e6,
        "tally_us_line": tally.cost / max(got, 1) * 1e6,
        "host_busy": host_cpu / seconds,
    }


def emit_all(sim: SimServer, profiles: list[Profile], rate: float, count: int, start: int) -> None:
    """Every host logs `count` lines at `rate`, all at once (one `ssh … specops-sim-emit` each)."""
    threads = [
        threading.Thread(target=sim.emit, args=(profile, rate, count, start))
        for profile in profiles
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def run_raw(
    sim: SimServer, profiles: list[Profile], rate: float, count: int, start: int
) -> dict[str, object]:
    tally = Tally(start, count, len(profiles))
    cpu0 = children_cpu()
    pipes = []
    for profile in profiles:
        remote = ["journalctl", "-u", profile.service.unit, "-f", "-o", "cat", "-n", "0"]
        # ssh and grep are both our direct children, so their CPU time is billed to this run.
        ssh = subprocess.Popen(sim.ssh_argv(profile, remote), stdout=subprocess.PIPE)
        proc = subprocess.Popen(
            ["grep", "--line-buffered", "-E", patterns_regex(profile)],
            stdin=ssh.stdout,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert ssh.stdout is not None
        ssh.stdout.close()
        pipes.append((profile.name, ssh, proc))
    time.sleep(1.0)  # let the followers attach before the burst starts

    def reader(host: str, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            tally.see(line, host)
            if tally.done.is_set():
                return

    for host, _, proc in pipes:
        threading.Thread(target=reader, args=(host, proc), daemon=True).start()
    host0, t0 = sim.cpu(), time.monotonic()
    emit_all(sim, profiles, rate, count, start)
    tally.done.wait(timeout=tally.timeout(rate, count))
    end, host_cpu = tally.finish or time.monotonic(), sim.cpu() - host0
    for _, ssh, proc in pipes:
        ssh.terminate()
        ssh.wait()
        proc.wait()
    cpu = children_cpu() - cpu0
    return row("raw ssh|grep", rate, count, tally, start, end - t0, cpu, host_cpu)


async def run_engine(
    sim: SimServer, profiles: list[Profile], rate: float, count: int, start: int
) -> dict[str, object]:
    fleet = Fleet(profiles, follow=True, history=0, poll_s=3600)
    tally = Tally(start, count, len(profiles))
    fleet.listen(count_batches(tally, profiles[0]))
    fleet.start()
    for profile in profiles:
        await fleet.sessions[profile.name].wait_connected(10)
    await asyncio.sleep(1.0)
    cpu0, host0, t0 = time.process_time(), sim.cpu(), time.monotonic()
    await asyncio.to_thread(emit_all, sim, profiles, rate, count, start)
    await asyncio.to_thread(tally.done.wait, tally.timeout(rate, count))
    end, host_cpu = tally.finish or time.monotonic(), sim.cpu() - host0
    cpu = time.process_time() - cpu0
    await fleet.stop()
    return row("specops engine", rate, count, tally, start, end - t0, cpu, host_cpu)


async def run_app(
    sim: SimServer, profiles: list[Profile], rate: float, count: int, start: int
) -> dict[str, object]:
    """The headless TUI: a line counts once the journal view has taken it from the inbox."""
    app = SpecopsApp(Fleet(profiles, history=0, poll_s=3600))
    tally = Tally(start, count, len(profiles))
    async with app.run_test(size=(160, 48)):
        count_view(app, tally)
        for profile in profiles:
            await app.engine.run(app.fleet.sessions[profile.name].wait_connected(10))
        await asyncio.sleep(1.0)
        cpu0, host0, t0 = time.process_time(), sim.cpu(), time.monotonic()
        await asyncio.to_thread(emit_all, sim, profiles, rate, count, start)
        # Waited for from a thread, as for the engine: `pilot.pause` every 10 ms walked
        # every widget and forced a screen update each time, work billed to the app that
        # it does not do on its own.
        await asyncio.to_thread(tally.done.wait, tally.timeout(rate, count))
        end, host_cpu = tally.finish or time.monotonic(), sim.cpu() - host0
        cpu = time.process_time() - cpu0
    return row("specops app", rate, count, tally, start, end - t0, cpu, host_cpu)


CLIENTS = {"engine": run_engine, "app": run_app}
COLUMNS = [
    "client",
    "hosts",
    "rate",
    "lines",
    "delivered",
    "lost",
    "lines_per_s",
    "cpu_us_line",
    "tally_us_line",
    "host_busy",
    "vs_raw",
    "app_vs_engine",
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rates", default="1000,5000,20000,0")
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--max-lines", type=int, default=200_000, help="per host, flat out")
    parser.add_argument("--clients", default="raw,engine,app", help="compared with raw")
    parser.add_argument("--hosts", type=int, default=1, help="hosts logging at once")
    parser.add_argument("--name", default="ingest", help="bench/results/NAME.json")
    args = parser.parse_args()
    rows: list[dict[str, object]] = []
    start = 1
    with sim_fleet(hosts=args.hosts) as sim:
        profiles = sim.profiles[: args.hosts]
        for rate in (float(r) for r in args.rates.split(",")):
            count = int(rate * args.seconds) if rate > 0 else args.max_lines
            raw: dict[str, object] | None = None
            engine: dict[str, object] | None = None
            for client in args.clients.split(","):
                if client == "raw":
                    result = raw = run_raw(sim, profiles, rate, count, start)
                else:
                    result = asyncio.run(CLIENTS[client](sim, profiles, rate, count, start))
                    if raw is not None:
                        result["vs_raw"] = _ratio(result["lines_per_s"], raw["lines_per_s"])
                    if client == "engine":
                        engine = result
                    elif engine is not None:
                        result["app_vs_engine"] = _ratio(
                            result["cpu_us_line"], engine["cpu_us_line"]
                        )
                rows.append(result)
                start += count
    title = "Journal ingest: specops vs ssh|grep (same hosts, same lines)"
    report(args.name, title, COLUMNS, rows, load=os.getloadavg())


def _ratio(a: object, b: object) -> float:
    return float(a) / float(b)  # type: ignore[arg-type]


if __name__ == "__main__":
    main()
