"""Startup: time from `specops demo` to its first painted frame, and to every host connected.

    python3 -m bench.startup [--runs 5]

Runs the real command in a tmux pane (as a person would) and polls the pane's text.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import time
from typing import Any

from bench.harness import report


def pane(session: str) -> str:
    return subprocess.run(
        ["tmux", "capture-pane", "-p", "-t", session], capture_output=True, text=True
    ).stdout


def once(session: str, hosts: int) -> dict[str, float]:
    subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True)
    t0 = time.monotonic()
    subprocess.run(
        [
            "tmux",
            "new-session",
            "-d",
            "-s",
            session,
            "-x",
            "120",
            "-y",
            "34",
            f"specops demo --hosts {hosts}",
        ],
        check=True,
    )
    first_paint = connected = float("nan")
    deadline = t0 + 30
    while time.monotonic() < deadline:
        text = pane(session)
        now = time.monotonic() - t0
        if first_paint != first_paint and "host" in text and "connection" in text:
            first_paint = now
        if text.count("connected") >= hosts:
            connected = now
            break
        time.sleep(0.01)
    subprocess.run(["tmux", "send-keys", "-t", session, "q"])
    time.sleep(0.5)
    subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True)
    return {"first_paint_s": first_paint, "all_connected_s": connected}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--hosts", type=int, default=2)
    args = parser.parse_args()
    if shutil.which("tmux") is None:
        raise SystemExit("tmux is needed: apt-get install tmux")
    samples = [once("specops-bench-startup", args.hosts) for _ in range(args.runs)]
    row: dict[str, Any] = {"runs": args.runs, "hosts": args.hosts}
    for key in ("first_paint_s", "all_connected_s"):
        values = [s[key] for s in samples]
        row[f"{key}_median"] = statistics.median(values)
        row[f"{key}_max"] = max(values)
    columns = list(row)
    report("startup", "specops demo: first painted frame (tmux)", columns, [row])


if __name__ == "__main__":
    main()
