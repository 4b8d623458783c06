"""Shared benchmark plumbing: a simulated fleet in its own process, the raw OpenSSH baseline,
result tables and JSON files.

The simulated hosts run in a separate process (`specops demo --serve`), so the host's work
(journald, sshd) is not billed to whichever client is being measured, and both clients —
specops and the raw `ssh … journalctl -f -o cat | grep` pipeline — talk to the same host.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from console.hosts.profiles import Profile, load_fleet

RESULTS = Path(__file__).resolve().parent / "results"
SEQ_RE = re.compile(r" seq=(\d+) t=([\d.]+)")
console = Console(highlight=False, width=max(Console().width, 140))


@dataclass
class SimServer:
    directory: Path
    process: subprocess.Popen[str] | None
    """None in a benchmark's child process: the parent serves the fleet."""
    profiles: list[Profile]

    def ssh_argv(
        self, profile: Profile, remote_command: Sequence[str], options: Sequence[str] = ()
    ) -> list[str]:
        """The OpenSSH client command an operator would type (strict host keys)."""
        return [
            "ssh",
            *openssh_options(self.directory, "-p", str(profile.ssh.port), *options),
            "root@127.0.0.1",
            shlex.join(remote_command),
        ]

    def cpu(self) -> float:
        """CPU seconds the simulated fleet's process has used (user and system)."""
        if self.process is None:
            raise RuntimeError("the simulated fleet is served by the parent process")
        fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def emit(self, profile: Profile, rate: float, count: int, start: int = 1) -> None:
        """Make the host log `count` numbered decode lines at `rate` lines/s (0: flat out)."""
        cmd = [
            "specops-sim-emit",
            "--rate",
            str(rate),
            "--count",
            str(count),
            "--start",
            str(start),
        ]
        subprocess.run(self.ssh_argv(profile, cmd), check=True, capture_output=True, timeout=30)


def openssh_options(directory: Path, *extra: str) -> list[str]:
    """OpenSSH client options: the key and strict known_hosts in `directory`, no user config."""
    return [
        "-F",
        "/dev/null",
        "-i",
        str(directory / "id_ed25519"),
        "-o",
        f"UserKnownHostsFile={directory / 'known_hosts'}",
        "-o",
        "StrictHostKeyChecking=yes",
        "-o",
        "BatchMode=yes",
        *extra,
    ]


@contextlib.contextmanager
def sim_fleet(
    hosts: int = 1, load_s: float = 0.3, decode_interval_s: float = 1.0
) -> Iterator[SimServer]:
    with tempfile.TemporaryDirectory(prefix="specops-bench-") as tmp:
        directory = Path(tmp)
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "console",
                "demo",
                "--serve",
                str(directory),
                "--hosts",
                str(hosts),
                "--load-delay",
                str(load_s),
                "--decode-interval",
                str(decode_interval_s),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        try:
            assert proc.stdout is not None
            for line in proc.stdout:
                if line.startswith("READY"):
                    break
            else:
                raise RuntimeError("simulated fleet did not start")
            yield SimServer(directory, proc, load_fleet(directory / "profiles"))
        finally:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()


def unwind_on_signals() -> None:
    """SIGTERM and SIGHUP raise SystemExit, as Ctrl-C raises KeyboardInterrupt: `finally`
    blocks and context managers run, so what a benchmark started (servers, hosts,
    temporary directories) is torn down however it ends."""

    def _exit(signum: int, frame: object) -> None:
        raise SystemExit(128 + signum)

    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _exit)


def patterns_regex(profile: Profile) -> str:
    return "|".join(profile.journal.patterns)


def percentile(values: Sequence[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def rss_mb(pid: int | None = None) -> float:
    status = Path(f"/proc/{pid or os.getpid()}/status").read_text()
    match = re.search(r"VmRSS:\s+(\d+) kB", status)
    return int(match.group(1)) / 1024 if match else float("nan")


def machine() -> dict[str, Any]:
    return {
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


def report(
    name: str,
    title: str,
    columns: Sequence[str],
    rows: list[dict[str, Any]],
    load: tuple[float, float, float] | None = None,
) -> Path:
    """Print a table and write bench/results/NAME.json (with the load average when given:
    other work on a shared machine moves lines/s more than CPU per line)."""
    table = Table(*columns, title=title)
    for row in rows:
        table.add_row(*(_cell(row.get(c)) for c in columns))
    console.print(table)
    info = machine()
    if load is not None:
        info["load_average"] = list(load)
        console.print(f"load average at the end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps({"machine": info, "rows": rows}, indent=2) + "\n")
    console.print(f"results: {path}")
    return path


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.1f}" if abs(value) >= 100 else f"{value:.3g}"
    if isinstance(value, int):
        return f"{value:,}"
    return "-" if value is None else str(value)
