"""Numbered SGLang decode lines in a real journald, as fast as it takes them.

`bench.journald` measures against a testbed host (tests/testbed: real systemd, journald and
OpenSSH in a network namespace); this module is what it adds to that host: a unit,
`specops-flood.service`, whose process writes COUNT numbered decode lines to its stdout
(journald's stdout stream, as SGLang's own lines get there) as fast as journald reads them,
and what the bench asks the host's journal and cgroups before and after a run.

The lines are SGLang 0.5.10's decode line (`tests/fixtures/sglang/0.5.10.jsonl`: the same
fields as the simulated host's flood in `bench.ingest`, so the two benches compare) stamped
with the current time and ending in ` seq=N t=EPOCH`, as the simulated flood's do
(`console.sim.load`): specops parses each as a decode batch, grep matches `accept len`, and
the bench's `Tally` counts both by their number.

journald's rate limiter (by default 10,000 lines per 30 s per unit, times a factor for the
free disk space: 37,500 here) would drop most of a flood, and says so (`Suppressed N
messages`) only with the unit's first line after the window. `LogRateLimitIntervalSec=0` in
the unit does not turn it off: 0 there means "journald's default" (systemd 252 then sets no
limit on the unit's cgroup, and a second 20,000-line flood lost its last 2,500 lines). The
host's journald gets `RateLimitIntervalSec=0` instead (a drop-in, then a restart of
journald), and the bench counts the notices anyway (`suppressed`).
"""

from __future__ import annotations

import json
import os
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

from console.transport import remote
from console.watch.journal import SUPPRESSED_MESSAGE_ID
from tests.testbed.hosts import Host, wait_for
from tests.testbed.layout import SIM_PYTHON

RELEASE = "0.5.10"
FIXTURE = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "sglang" / f"{RELEASE}.jsonl"
UNIT = "specops-flood.service"
WRITER = "/root/specops-flood.py"
ARGS = "/root/specops-flood.env"
"""COUNT and START of the next run (the unit's EnvironmentFile, rewritten before each)."""

UNIT_FILE = f"""\
[Unit]
Description=Numbered SGLang decode lines, flat out (bench.journald)

[Service]
Type=exec
EnvironmentFile={ARGS}
ExecStart={SIM_PYTHON} {WRITER}
"""
JOURNALD_DROPIN = "zz-specops-bench.conf"
JOURNALD_CONF = """\
# bench.journald: no rate limit (a flood is the point; see bench/flood.py)
[Journal]
RateLimitIntervalSec=0
"""

WRITER_SOURCE = '''\
"""bench.journald's flood: COUNT numbered SGLang {release} decode lines from START, flat out."""
import os
import sys
import time

TAIL = {tail!r}
"""The fixture's line after its header's timestamp, which is the current time's."""
count, start = int(os.environ["COUNT"]), int(os.environ["START"])
write = sys.stdout.write  # block-buffered: stdout is journald's stream socket
second, stamp = -1, ""
for seq in range(start, start + count):
    now = time.time()
    if int(now) != second:
        second = int(now)
        stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(now))
    write(f"[{{stamp}}{{TAIL}}, seq={{seq}} t={{now:.6f}}\\n")
'''


def decode_line() -> str:
    """The fixture's first decode line with an accept length (what a DDTree server logs)."""
    for text in FIXTURE.read_text().splitlines():
        row = json.loads(text)
        if row["kind"] == "decode" and row["expect"].get("accept_len") is not None:
            line: str = row["line"]
            if not re.match(r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d ", line):
                raise ValueError(f"{FIXTURE}: no timestamped header in {line!r}")
            return line
    raise ValueError(f"{FIXTURE}: no decode line with an accept length")


@dataclass(frozen=True)
class Truth:
    """What the host's journal holds of one flood: journald's own account."""

    lines: int
    """Numbered lines after the cursor."""
    first: float
    last: float
    """journald's timestamps of the first and the last of them (seconds since the epoch)."""

    @property
    def rate(self) -> float:
        """Lines a second journald took them at (its own timestamps)."""
        return (self.lines - 1) / (self.last - self.first) if self.last > self.first else 0.0


class Flood:
    """The flood unit on one testbed host."""

    def __init__(self, host: Host) -> None:
        self.host = host

    def install(self) -> None:
        """Turn journald's rate limit off, write the unit and its writer into the host, and run
        it once with no lines, so the unit has journal entries (systemd's) to take a cursor
        from."""
        line = decode_line()
        etc = self.host.directory / "etc-systemd"
        (etc / "journald.conf.d" / JOURNALD_DROPIN).write_text(JOURNALD_CONF)
        self.host.run("systemctl", "restart", "systemd-journald.service")
        (etc / "system" / UNIT).write_text(UNIT_FILE)
        root = self.host.directory / "root"
        source = WRITER_SOURCE.format(release=RELEASE, tail=line[20:])
        (root / Path(WRITER).name).write_text(source)
        self.host.run("systemctl", "daemon-reload")
        self.start(0, 0)
        wait_for(self._inactive, 30, f"{UNIT} did not finish")

    def start(self, count: int, first: int) -> None:
        """Start writing `count` lines numbered from `first`; returns once the writer runs."""
        (self.host.directory / "root" / Path(ARGS).name).write_text(
            f"COUNT={count}\nSTART={first}\n"
        )
        self.host.run("systemctl", "start", UNIT)

    def _inactive(self) -> bool:
        return self.host.show(UNIT, "ActiveState")["ActiveState"] in ("inactive", "failed")

    def wait_logged(self, last: int, timeout: float = 120.0) -> None:
        """Until the journal holds line `last` and the writer has exited."""
        needle = f" seq={last} "

        def logged() -> bool:
            out = self.host.run("journalctl", f"_SYSTEMD_UNIT={UNIT}", "-n", "1", "-o", "cat")
            return needle in out.stdout

        wait_for(logged, timeout, f"{UNIT}: line {last} not in the journal", interval=0.1)
        wait_for(self._inactive, 30, f"{UNIT} did not finish")

    def cursor(self) -> str:
        """The unit's newest entry's cursor, taken as specops's follower takes its baseline
        (`remote.journal_last`): an entry that matches `-u UNIT`, which `--after-cursor`
        needs (journalctl skips one entry past the cursor, so a cursor of an entry the unit
        filter does not match would skip the unit's first entry after it)."""
        out = self.host.run(*remote.journal_last(UNIT).argv).stdout
        entries = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
        if not entries:
            raise RuntimeError(f"{self.host.name}: {UNIT} has no journal entry to resume after")
        cursor: str = entries[-1]["__CURSOR"]
        return cursor

    def truth(self, cursor: str) -> Truth:
        """journald's numbered lines after `cursor`, and its timestamps of the first and the
        last (counted on the host: a flood's JSON is too big to ship for three numbers)."""
        script = (
            f"journalctl -u {UNIT} -q --after-cursor={shlex.quote(cursor)} -o short-unix"
            " | awk '/ seq=[0-9]+ t=/ {if (!n++) first = $1; last = $1}"
            ' END {printf "%d %.6f %.6f\\n", n, first, last}\''
        )
        lines, first, last = self.host.run("sh", "-c", script, timeout=120).stdout.split()
        return Truth(int(lines), float(first), float(last))

    def suppressed(self) -> int:
        """journald's `Suppressed N messages` notices so far (any unit)."""
        out = self.host.run("journalctl", f"MESSAGE_ID={SUPPRESSED_MESSAGE_ID}", "-q", "-o", "cat")
        return len(out.stdout.splitlines())


def journalctl_cpu(host: Host) -> dict[int, float]:
    """CPU seconds of each journalctl running on the host, by PID (/proc/PID/stat)."""
    tick = os.sysconf("SC_CLK_TCK")
    found = {}
    for proc in host.processes():
        if proc.comm == "journalctl":
            try:
                fields = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue  # gone meanwhile
            found[proc.pid] = (int(fields[11]) + int(fields[12])) / tick
    return found


def cgroup_cpu(host: Host, unit: str) -> float:
    """CPU seconds of a unit's cgroup on the host (every process it ever ran, reaped or not)."""
    stat = host.cgroup / "system.slice" / unit / "cpu.stat"
    for line in stat.read_text().splitlines():
        key, _, value = line.partition(" ")
        if key == "usage_usec":
            return int(value) / 1e6
    raise RuntimeError(f"{stat}: no usage_usec")
