"""Ingest: lines/s delivered, client CPU per million lines, and loss — specops vs raw pipeline.

The raw baseline is what operators run today:
    ssh host journalctl -u UNIT -f -o cat | grep --line-buffered -E '<profile patterns>'
specops runs its real engine (Fleet → HostSession → JournalFollower → filter + SGLang parse)
and, separately, the whole headless app (engine thread, inbox, journal view, metrics and
chart redraws), which counts a line when the journal view takes it. All follow the same
simulated host, one after the other, for the same numbered lines; CPU is the client
process's own (both of the app's threads), or ssh's and grep's.

    python3 -m bench.ingest [--rates 1000,5000,20000,0] [--seconds 5] [--clients raw,engine,app]
"""

from __future__ import annotations

import argparse
import asyncio
import re
import resource
import subprocess
import threading
import time
from collections.abc import Iterable

from bench.harness import SEQ_RE, SimServer, patterns_regex, report, sim_fleet
from console.app import SpecopsApp
from console.events import JournalBatch, JournalEntry
from console.fleet import Fleet
from console.profiles import Profile
from widgets.journal_view import JournalView


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


class Tally:
    """The numbered lines a client received, and when the last one arrived."""

    def __init__(self, start: int, count: int) -> None:
        self.seen: set[int] = set()
        self.last = start + count - 1
        self.finish = 0.0
        self.done = threading.Event()

    def see(self, message: str) -> None:
        m = SEQ_RE.search(message)
        if m:
            seq = int(m.group(1))
            self.seen.add(seq)
            if seq == self.last:
                self.finish = time.monotonic()
                self.done.set()

    def timeout(self, rate: float, count: int) -> float:
        return max(60.0, count / max(rate, 1) * 3)


def row(
    client: str, rate: float, count: int, seen: set[int], start: int, seconds: float, cpu: float
) -> dict[str, object]:
    """One result line: what arrived of lines start..start+count-1, how fast, at what cost."""
    got = len([s for s in seen if start <= s < start + count])
    return {
        "client": client,
        "rate": rate or "max",
        "lines": count,
        "delivered": got,
        "lost": count - got,
        "lines_per_s": got / seconds,
        "cpu_s_per_M": cpu / max(got, 1) * 1e6,
    }


def run_raw(
    sim: SimServer, profile: Profile, rate: float, count: int, start: int
) -> dict[str, object]:
    remote = ["journalctl", "-u", profile.service.unit, "-f", "-o", "cat", "-n", "0"]
    cpu0 = children_cpu()
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
    time.sleep(1.0)  # let the follower attach before the burst starts
    tally = Tally(start, count)

    def reader() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            tally.see(line)
            if tally.done.is_set():
                return

    thread = threading.Thread(target=reader, daemon=True)
    thread.start()
    t0 = time.monotonic()
    sim.emit(profile, rate, count, start)
    tally.done.wait(timeout=tally.timeout(rate, count))
    end = tally.finish or time.monotonic()
    ssh.terminate()
    ssh.wait()
    proc.wait()
    cpu = children_cpu() - cpu0
    return row("raw ssh|grep", rate, count, tally.seen, start, end - t0, cpu)


async def run_engine(
    sim: SimServer, profile: Profile, rate: float, count: int, start: int
) -> dict[str, object]:
    pattern = re.compile(patterns_regex(profile))
    fleet = Fleet([profile], follow=True, history=0, poll_s=3600)
    tally = Tally(start, count)

    def listen(event: object) -> None:
        if not isinstance(event, JournalBatch):
            return
        for entry in event.entries:
            if pattern.search(entry.message):
                tally.see(entry.message)

    fleet.listen(listen)
    fleet.start()
    await fleet.sessions[profile.name].wait_connected(10)
    await asyncio.sleep(1.0)
    cpu0 = time.process_time()
    t0 = time.monotonic()
    await asyncio.to_thread(sim.emit, profile, rate, count, start)
    await asyncio.to_thread(tally.done.wait, tally.timeout(rate, count))
    end = tally.finish or time.monotonic()
    cpu = time.process_time() - cpu0
    await fleet.stop()
    return row("specops engine", rate, count, tally.seen, start, end - t0, cpu)


async def run_app(
    sim: SimServer, profile: Profile, rate: float, count: int, start: int
) -> dict[str, object]:
    """The headless TUI: a line counts once the journal view has taken it from the inbox."""
    app = SpecopsApp(Fleet([profile], history=0, poll_s=3600))
    tally = Tally(start, count)
    async with app.run_test(size=(160, 48)) as pilot:
        view = app.query_one(JournalView)
        take = view.add

        def add(host: str, records: Iterable[JournalEntry]) -> None:
            records = tuple(records)
            for record in records:
                tally.see(record.message)
            take(host, records)

        view.add = add  # type: ignore[method-assign]
        await app.engine.run(app.fleet.sessions[profile.name].wait_connected(10))
        await asyncio.sleep(1.0)
        cpu0 = time.process_time()
        t0 = time.monotonic()
        await asyncio.to_thread(sim.emit, profile, rate, count, start)
        deadline = time.monotonic() + tally.timeout(rate, count)
        while not tally.done.is_set() and time.monotonic() < deadline:
            await pilot.pause(0.01)
        end = tally.finish or time.monotonic()
        cpu = time.process_time() - cpu0
    return row("specops app", rate, count, tally.seen, start, end - t0, cpu)


CLIENTS = {"engine": run_engine, "app": run_app}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rates", default="1000,5000,20000,0")
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--max-lines", type=int, default=200_000)
    parser.add_argument("--clients", default="raw,engine,app", help="compared with raw")
    args = parser.parse_args()
    clients = args.clients.split(",")
    rows: list[dict[str, object]] = []
    start = 1
    with sim_fleet(hosts=1) as sim:
        profile = sim.profiles[0]
        for rate in (float(r) for r in args.rates.split(",")):
            count = int(rate * args.seconds) if rate > 0 else args.max_lines
            raw: dict[str, object] | None = None
            for client in clients:
                if client == "raw":
                    result = raw = run_raw(sim, profile, rate, count, start)
                else:
                    result = asyncio.run(CLIENTS[client](sim, profile, rate, count, start))
                    if raw is not None:
                        result["vs_raw"] = float(result["lines_per_s"]) / float(raw["lines_per_s"])  # type: ignore[arg-type]
                rows.append(result)
                start += count
    report(
        "ingest",
        "Journal ingest: specops vs ssh|grep (same host, same lines)",
        ["client", "rate", "lines", "delivered", "lost", "lines_per_s", "cpu_s_per_M", "vs_raw"],
        rows,
    )


if __name__ == "__main__":
    main()
