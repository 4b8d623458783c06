"""`specops bench PATH... [--baseline NAME] [--json | --csv]`: read bench results by content.

Files and directories (a package's `bench/`, a host's results directory); each file's shape
is found from what it holds (console/findings/bench.py). Prints a matrix per file with the
speedup over the baseline (the autoregressive file by default), a bar chart and the
configuration each was measured with. A crashed run is a row saying so, never a failure:
the exit status is 0 whenever the files could be read, 2 for a bad path or `--baseline`.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from console.cli.common import EXIT_OK, EXIT_USAGE, err, out
from console.findings.bench import choose_baseline
from console.findings.bench_files import load_bench
from console.findings.bench_view import csv_text, json_lines, render


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    cmd = sub.add_parser(
        "bench",
        parents=[common],
        help="bench results (bench_serving, bench_one_batch_server, sweeps) with speedups",
    )
    cmd.add_argument("paths", nargs="+", metavar="PATH", help="bench files or directories")
    cmd.add_argument(
        "--baseline",
        metavar="NAME",
        help="file (stem or path) speedups are measured against (default: the autoregressive one)",
    )
    fmt = cmd.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="one JSON object per file")
    fmt.add_argument("--csv", action="store_true", help="one CSV row per measurement")


def run(args: argparse.Namespace) -> int:
    try:
        files = load_bench(args.paths)
    except FileNotFoundError as exc:
        err.print(f"specops: {exc}", markup=False, soft_wrap=True)
        return EXIT_USAGE
    except OSError as exc:
        err.print(f"specops: {exc.filename}: {exc.strerror}", markup=False, soft_wrap=True)
        return EXIT_USAGE
    if not files:
        err.print("specops: no bench files (*.json, *.jsonl) under " + " ".join(args.paths))
        return EXIT_USAGE
    try:
        baseline = choose_baseline(files, args.baseline)
    except ValueError as exc:
        err.print(f"specops: {exc}", markup=False, soft_wrap=True)
        return EXIT_USAGE
    if args.json:
        sys.stdout.write(json_lines(files, baseline))
    elif args.csv:
        sys.stdout.write(csv_text(files, baseline))
    else:
        out.print(render(files, baseline))
    sys.stdout.flush()
    return EXIT_OK
