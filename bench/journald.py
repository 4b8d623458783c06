"""Journal ingest against a real host: specops vs `ssh … journalctl | grep`, real journald.

`bench.ingest` compares the two clients against the simulated host (console/sim, Python
rendering journald's JSON), which flat out is itself the limit: it says little about the
client. This bench borrows the testbed's hosts instead (tests/testbed: systemd as PID 1 in a
network namespace, the host's own journald, journalctl and OpenSSH sshd; booted here, torn
down however the bench ends) and measures the same clients against them, in one run:

- **backlog**: the unit's journal is filled with N numbered SGLang decode lines
  (bench/flood.py; the fill is not timed) after a cursor taken first; then each client
  reads from that cursor to the last line, one after the other. This is specops flat out,
  and what it does on every reconnect and whenever an on-demand host is opened again.
- **live**: each client follows the unit from a fresh cursor while it writes N lines as
  fast as journald takes them; journald's own rate is then the limit for both (`journald`:
  lines a second by journald's timestamps).

The clients: `raw`, the OpenSSH client and grep (`ssh host journalctl -u UNIT -o cat
--after-cursor=C -f | grep --line-buffered -E <profile patterns>`); `engine`, specops's
engine (Fleet: session, follower resumed after the cursor, the profile's filter, the
monitor) as `bench.ingest` runs it; `app`, the headless TUI, a line counted when the
journal view takes it. Runs alternate the clients' order, so order effects show.

Columns: `lines_per_s` from the first numbered line received to the last; `catchup_s` from
launching the client to the last line (connecting included); `cpu_us_line`, the client's
CPU a line (raw: ssh and grep; specops: its process from the connection up, without the
bench's own count, see `bench.ingest`); `host_busy`, the host's sshd and journalctl (its
`ssh.service` cgroup) over the run's wall time (1.0: a core) and `host_us_line` the same a
line; `journalctl_busy` the client's journalctl alone, `journald_busy` journald;
`suppressed`, journald's rate-limit notices.

    python3 -m bench.journald [--lines 200000] [--runs 2] [--clients raw,engine,app]
                              [--phases backlog,live] [--name journald]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shlex
import subprocess
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.flood import UNIT, Flood, cgroup_cpu, journalctl_cpu
from bench.harness import console, openssh_options, patterns_regex, report, unwind_on_signals
from bench.ingest import Tally, _ratio, children_cpu, count_batches, count_view
from console.app import SpecopsApp
from console.fleet.fleet import Fleet
from console.hosts.events import Event, HostStateChanged
from console.hosts.profiles import Profile
from console.transport.ssh import ConnState
from tests.testbed.bed import Testbed
from tests.testbed.helpers import until
from tests.testbed.hosts import Host

ATTACH_S = 1.0
"""Live runs: how long a client follows before the flood starts (its stream is up)."""


@dataclass
class Trial:
    """One client's read of `count` numbered lines from `first`, after `cursor`."""

    bed: Testbed
    host: Host
    profile: Profile
    """The testbed host's profile, following the flood's unit."""
    flood: Flood
    cursor: str
    first: int
    count: int
    live: bool
    """The lines are written while the client follows (else they are in the journal)."""
    host_cpu: float = 0.0
    journald_cpu: float = 0.0
    journalctl_cpu: float = 0.0
    journalctls: dict[int, float] = field(default_factory=dict)
    started: float = 0.0
    ended: float = 0.0
    load1: float = 0.0

    def begin(self) -> None:
        """The run's clock and the host's CPU start now."""
        self.host_cpu = -cgroup_cpu(self.host, "ssh.service")
        self.journald_cpu = -cgroup_cpu(self.host, "systemd-journald.service")
        self.journalctls = journalctl_cpu(self.host)
        self.started = time.monotonic()

    def end(self, tally: Tally) -> None:
        """The last line arrived (or the wait timed out): the host's CPU stops now."""
        self.ended = tally.finish or time.monotonic()
        self.host_cpu += cgroup_cpu(self.host, "ssh.service")
        self.journald_cpu += cgroup_cpu(self.host, "systemd-journald.service")
        # The client's journalctl runs until the client stops, after this: none is missed.
        now = journalctl_cpu(self.host)
        self.journalctl_cpu = sum(cpu - self.journalctls.get(pid, 0.0) for pid, cpu in now.items())
        self.load1 = os.getloadavg()[0]

    def load(self) -> None:
        """Live runs: the flood starts (the client follows already)."""
        if self.live:
            self.flood.start(self.count, self.first)

    def timeout(self) -> float:
        return max(60.0, self.count / 5000)

    def row(self, client: str, tally: Tally, cpu: float) -> dict[str, object]:
        """The run's figures; `cpu` is the client's own (without the bench's count)."""
        seen = tally.seen.get(self.host.name, set())
        got = len([s for s in seen if self.first <= s < self.first + self.count])
        wall = self.ended - self.started
        flowing = tally.finish - tally.first if tally.finish and tally.first else 0.0
        return {
            "phase": "live" if self.live else "backlog",
            "client": client,
            "lines": self.count,
            "lost": self.count - got,
            "lines_per_s": (got - 1) / flowing if flowing > 0 else 0.0,
            "catchup_s": wall,
            "cpu_us_line": cpu / max(got, 1) * 1e6,
            "tally_us_line": tally.cost / max(got, 1) * 1e6,
            "host_busy": self.host_cpu / wall,
            "host_us_line": self.host_cpu / max(got, 1) * 1e6,
            "journalctl_busy": self.journalctl_cpu / wall,
            "journald_busy": self.journald_cpu / wall,
            "load1": self.load1,
        }


# --- clients -------------------------------------------------------------------------


def run_raw(trial: Trial) -> dict[str, object]:
    """OpenSSH's client and grep, as an operator types it."""
    tally = Tally(trial.first, trial.count)
    remote = ["journalctl", "-u", UNIT, "-o", "cat", f"--after-cursor={trial.cursor}", "-f"]
    argv = [
        "ssh",
        *openssh_options(trial.bed.directory),
        f"root@{trial.host.address}",
        shlex.join(remote),
    ]
    cpu0 = children_cpu()
    trial.begin()
    # ssh and grep are both our direct children, so their CPU time is billed to this run.
    ssh = subprocess.Popen(argv, stdout=subprocess.PIPE)
    grep = subprocess.Popen(
        ["grep", "--line-buffered", "-E", patterns_regex(trial.profile)],
        stdin=ssh.stdout,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert ssh.stdout is not None and grep.stdout is not None
    ssh.stdout.close()
    lines = grep.stdout

    def reader() -> None:
        for line in lines:
            tally.see(line, trial.host.name)
            if tally.done.is_set():
                return

    threading.Thread(target=reader, daemon=True).start()
    try:
        if trial.live:
            time.sleep(ATTACH_S)
            trial.begin()
            trial.load()
        tally.done.wait(timeout=trial.timeout())
        trial.end(tally)
    finally:
        ssh.terminate()
        ssh.wait()
        grep.wait()
    result = trial.row("raw ssh|grep", tally, children_cpu() - cpu0)
    result["tally_us_line"] = None  # raw's count runs here, outside the ssh and grep measured
    return result


class ResumingFleet(Fleet):
    """The real engine, its followers resuming after a cursor (as after a reconnect)."""

    def __init__(self, profiles: Iterable[Profile], cursor: str, **options: Any) -> None:
        super().__init__(profiles, **options)
        self.resume_after = cursor

    def start(self) -> None:
        super().start()
        # The followers' tasks have not run yet (start awaits nothing): each reads its cursor
        # first thing, skips the baseline read and follows from there.
        for follower in self.followers.values():
            follower.cursor = self.resume_after


class Clock:
    """specops's CPU from the moment its session is up (start-up is not reading)."""

    def __init__(self) -> None:
        self.cpu0: float | None = None

    def listen(self, event: Event) -> None:
        if (
            self.cpu0 is None
            and isinstance(event, HostStateChanged)
            and event.state.state is ConnState.CONNECTED
        ):
            self.cpu0 = time.process_time()

    def reset(self) -> None:
        self.cpu0 = time.process_time()

    def used(self) -> float:
        return time.process_time() - (self.cpu0 if self.cpu0 is not None else 0.0)


async def run_engine(trial: Trial) -> dict[str, object]:
    """The engine (Fleet → session → follower → filter + monitor), on this loop."""
    fleet = ResumingFleet([trial.profile], trial.cursor, history=0, poll_s=3600)
    tally, clock = Tally(trial.first, trial.count), Clock()
    fleet.listen(count_batches(tally, trial.profile))
    fleet.listen(clock.listen)
    trial.begin()
    fleet.start()
    try:
        cpu = await _read(trial, fleet, tally, clock, _itself)
    finally:
        await fleet.stop()
    return trial.row("specops engine", tally, cpu)


async def run_app(trial: Trial) -> dict[str, object]:
    """The headless TUI: a line counts once the journal view has taken it from the inbox."""
    fleet = ResumingFleet([trial.profile], trial.cursor, history=0, poll_s=3600)
    app = SpecopsApp(fleet)
    tally, clock = Tally(trial.first, trial.count), Clock()
    fleet.listen(clock.listen)
    trial.begin()
    async with app.run_test(size=(160, 48)):
        count_view(app, tally)
        cpu = await _read(trial, fleet, tally, clock, app.engine.run)
    return trial.row("specops app", tally, cpu)


async def _itself(coro: Coroutine[Any, Any, None]) -> None:
    await coro


async def _read(
    trial: Trial,
    fleet: Fleet,
    tally: Tally,
    clock: Clock,
    on_engine: Callable[[Coroutine[Any, Any, None]], Awaitable[None]],
) -> float:
    """Until the last line is counted (a live run starts the flood once the follower streams);
    specops's CPU for it, without the bench's own count."""
    if trial.live:
        await on_engine(_attached(fleet, trial))
        clock.reset()
        await asyncio.to_thread(trial.load)
    # Waited for from a thread (see bench.ingest.run_app: `pilot.pause` costs the app).
    await asyncio.to_thread(tally.done.wait, trial.timeout())
    cpu = clock.used() - tally.cost
    trial.end(tally)
    return cpu


async def _attached(fleet: Fleet, trial: Trial) -> None:
    """Until the follower streams, then ATTACH_S more; the run's clock starts after."""
    session = fleet.sessions[trial.profile.name]
    if not await session.wait_connected(20):
        raise RuntimeError(f"{trial.host.name}: specops did not connect")
    follower = fleet.followers[trial.profile.name]
    await until(lambda: follower.restarts >= 1, 20, "specops following")
    await asyncio.sleep(ATTACH_S)
    trial.begin()


CLIENTS: dict[str, Callable[[Trial], dict[str, object] | Coroutine[Any, Any, dict[str, object]]]]
CLIENTS = {"raw": run_raw, "engine": run_engine, "app": run_app}


def run(client: str, trial: Trial) -> dict[str, object]:
    before = trial.flood.suppressed()
    result = CLIENTS[client](trial)
    if not isinstance(result, dict):
        result = asyncio.run(result)
    truth = trial.flood.truth(trial.cursor)
    result["journald_lines"] = truth.lines
    if trial.live:
        result["journald_per_s"] = truth.rate
    result["suppressed"] = trial.flood.suppressed() - before
    console.print(_summary(result))
    return result


def _summary(result: dict[str, object]) -> str:
    return (
        f"{result['phase']:8} {result['client']:15} {result['lines_per_s']:>10,.0f} lines/s"
        f"  lost {result['lost']}  cpu {result['cpu_us_line']:.2f} µs/line"
        f"  host {result['host_busy']:.2f} (journalctl {result['journalctl_busy']:.2f})"
        f"  load {result['load1']:.2f}"
    )


# --- the bench -------------------------------------------------------------------------


@contextmanager
def testbed_host() -> Iterator[tuple[Testbed, Host]]:
    """One testbed host with the flood unit, torn down however the bench ends."""
    with tempfile.TemporaryDirectory(prefix="specops-bench-journald-") as tmp:
        # The simulated server logs a decode line a minute, not every 0.5 s: a quiet host.
        bed = Testbed(Path(tmp), 1, decode_s=60.0)
        bed.start()
        try:
            yield bed, bed.hosts[0]
        finally:
            bed.stop()


@dataclass
class Plan:
    clients: list[str]
    phases: list[str]
    lines: int
    runs: int
    rows: list[dict[str, object]] = field(default_factory=list)


def bench(plan: Plan) -> None:
    with testbed_host() as (bed, host):
        flood = Flood(host)
        flood.install()
        profile = bed.profile(host.name)
        profile = profile.model_copy(
            update={"service": profile.service.model_copy(update={"unit": UNIT})}
        )
        first = 1
        for n in range(plan.runs):
            order = plan.clients if n % 2 == 0 else plan.clients[::-1]
            if "backlog" in plan.phases:
                cursor = flood.cursor()
                flood.start(plan.lines, first)
                flood.wait_logged(first + plan.lines - 1)
                fill = flood.truth(cursor)
                console.print(f"run {n + 1}: filled {fill.lines:,} lines at {fill.rate:,.0f}/s")
                for client in order:
                    trial = Trial(bed, host, profile, flood, cursor, first, plan.lines, False)
                    plan.rows.append({"run": n + 1, **run(client, trial)})
                first += plan.lines
            if "live" in plan.phases:
                for client in order:
                    trial = Trial(
                        bed, host, profile, flood, flood.cursor(), first, plan.lines, True
                    )
                    plan.rows.append({"run": n + 1, **run(client, trial)})
                    flood.wait_logged(first + plan.lines - 1)
                    first += plan.lines


COLUMNS = [
    "run",
    "phase",
    "client",
    "lines",
    "lost",
    "lines_per_s",
    "vs_raw",
    "catchup_s",
    "cpu_us_line",
    "tally_us_line",
    "host_busy",
    "host_us_line",
    "journalctl_busy",
    "journald_busy",
    "journald_lines",
    "journald_per_s",
    "suppressed",
    "load1",
]


def compare(rows: list[dict[str, object]]) -> None:
    """`vs_raw`: each specops row's lines/s over raw's in the same run and phase."""
    raws = {(r["run"], r["phase"]): r for r in rows if r["client"] == "raw ssh|grep"}
    for row in rows:
        raw = raws.get((row["run"], row["phase"]))
        if raw is not None and row is not raw and raw["lines_per_s"]:
            row["vs_raw"] = _ratio(row["lines_per_s"], raw["lines_per_s"])


def main() -> None:
    unwind_on_signals()  # the testbed host is torn down however the bench ends
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lines", type=int, default=200_000, help="numbered lines a run")
    parser.add_argument("--runs", type=int, default=2, help="rounds, clients' order alternating")
    parser.add_argument("--clients", default="raw,engine,app")
    parser.add_argument("--phases", default="backlog,live")
    parser.add_argument("--name", default="journald", help="bench/results/NAME.json")
    args = parser.parse_args()
    plan = Plan(args.clients.split(","), args.phases.split(","), args.lines, args.runs)
    if os.geteuid() != 0:
        raise SystemExit("bench.journald boots testbed hosts: run it as root")
    try:
        bench(plan)
    finally:
        if plan.rows:
            compare(plan.rows)
            title = "Journal ingest against real journald: specops vs ssh|grep (same lines)"
            report(args.name, title, COLUMNS, plan.rows, load=os.getloadavg())


if __name__ == "__main__":
    main()
