"""Ingest: lines/s delivered, client CPU per million lines, and loss — specops vs raw pipeline.

The raw baseline is what operators run today:
    ssh host journalctl -u UNIT -f -o cat | grep --line-buffered -E '<profile patterns>'
specops runs its real engine (Fleet → HostSession → JournalFollower → filter + SGLang parse).
Both follow the same simulated host, one after the other, for the same numbered lines.

    python3 -m bench.ingest [--rates 1000,5000,20000,0] [--seconds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import re
import resource
import subprocess
import threading
import time

from bench.harness import SEQ_RE, SimServer, patterns_regex, report, sim_fleet
from console.events import JournalBatch
from console.fleet import Fleet
from console.profiles import Profile


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


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
    seen: set[int] = set()
    last = start + count - 1
    done = threading.Event()
    finish = [0.0]

    def reader() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            m = SEQ_RE.search(line)
            if m:
                seq = int(m.group(1))
                seen.add(seq)
                if seq == last:
                    finish[0] = time.monotonic()
                    done.set()
                    return

    thread = threading.Thread(target=reader, daemon=True)
    thread.start()
    t0 = time.monotonic()
    sim.emit(profile, rate, count, start)
    done.wait(timeout=max(60.0, count / max(rate, 1) * 3))
    end = finish[0] or time.monotonic()
    ssh.terminate()
    ssh.wait()
    proc.wait()
    cpu = children_cpu() - cpu0
    return row("raw ssh|grep", rate, count, seen, start, end - t0, cpu)


async def run_engine(
    sim: SimServer, profile: Profile, rate: float, count: int, start: int
) -> dict[str, object]:
    pattern = re.compile(patterns_regex(profile))
    fleet = Fleet([profile], follow=True, history=0, poll_s=3600)
    seen: set[int] = set()
    last = start + count - 1
    done = asyncio.Event()
    finish = [0.0]

    def listen(event: object) -> None:
        if not isinstance(event, JournalBatch):
            return
        for entry in event.entries:
            message = entry.message
            if not pattern.search(message):
                continue
            m = SEQ_RE.search(message)
            if m:
                seq = int(m.group(1))
                seen.add(seq)
                if seq == last:
                    finish[0] = time.monotonic()
                    done.set()

    fleet.listen(listen)
    fleet.start()
    await fleet.sessions[profile.name].wait_connected(10)
    await asyncio.sleep(1.0)
    cpu0 = time.process_time()
    t0 = time.monotonic()
    await asyncio.to_thread(sim.emit, profile, rate, count, start)
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(done.wait(), timeout=max(60.0, count / max(rate, 1) * 3))
    end = finish[0] or time.monotonic()
    cpu = time.process_time() - cpu0
    await fleet.stop()
    return row("specops engine", rate, count, seen, start, end - t0, cpu)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rates", default="1000,5000,20000,0")
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--max-lines", type=int, default=200_000)
    args = parser.parse_args()
    rows: list[dict[str, object]] = []
    start = 1
    with sim_fleet(hosts=1) as sim:
        profile = sim.profiles[0]
        for rate in (float(r) for r in args.rates.split(",")):
            count = int(rate * args.seconds) if rate > 0 else args.max_lines
            rows.append(run_raw(sim, profile, rate, count, start))
            start += count
            rows.append(asyncio.run(run_engine(sim, profile, rate, count, start)))
            start += count
            raw, ours = rows[-2], rows[-1]
            ours["vs_raw"] = float(ours["lines_per_s"]) / float(raw["lines_per_s"])  # type: ignore[arg-type]
    report(
        "ingest",
        "Journal ingest: specops vs ssh|grep (same host, same lines)",
        ["client", "rate", "lines", "delivered", "lost", "lines_per_s", "cpu_s_per_M", "vs_raw"],
        rows,
    )


if __name__ == "__main__":
    main()
