"""`specops report PACKAGE [--out FILE]`: the findings report, from the package's evidence.

Writes `REPORT.md` into the package (or FILE), atomically and only when its content changed,
then refreshes the package's manifest so `sha256sum -c MANIFEST.sha256` passes with the
report listed. The same package always gives the same bytes (console/findings/report.py).
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

from rich.markup import escape

from console.cli.common import EXIT_FAILED, EXIT_OK, EXIT_USAGE, err, out
from console.findings.report import REPORT_NAME, write_report


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    cmd = sub.add_parser(
        "report", parents=[common], help="write the findings report (REPORT.md) into a package"
    )
    cmd.add_argument("package", metavar="PACKAGE")
    cmd.add_argument("--out", metavar="FILE", help=f"write here instead of PACKAGE/{REPORT_NAME}")
    cmd.add_argument("--json", action="store_true", help="one JSON object: path, written")


def run(args: argparse.Namespace) -> int:
    package = Path(args.package).expanduser()
    if not package.is_dir():
        err.print(f"specops: {package}: not a directory", markup=False, soft_wrap=True)
        return EXIT_USAGE
    target = Path(args.out).expanduser() if args.out else package / REPORT_NAME
    if not target.parent.is_dir():
        err.print(f"specops: {target.parent}: no such directory", markup=False, soft_wrap=True)
        return EXIT_USAGE
    try:
        changed, manifest = write_report(package, target)
    except OSError as exc:
        err.print(f"specops: {exc.filename or target}: {exc.strerror}", markup=False)
        return EXIT_FAILED
    if args.json:
        record = {"path": os.fspath(target), "written": changed, "manifest_refreshed": manifest}
        print(json.dumps(record), flush=True)
        return EXIT_OK
    verb = "written" if changed else "unchanged"
    note = "; manifest refreshed" if manifest else ""
    out.print(f"{escape(os.fspath(target))}: {verb}{note}", soft_wrap=True)
    return EXIT_OK
