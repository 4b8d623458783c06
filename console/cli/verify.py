"""`specops verify PACKAGE`: re-hash a package against its MANIFEST.sha256; list what differs."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from rich.markup import escape

from console.cli.common import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    err,
    out,
)
from console.local.redaction import unredacted
from console.package.manifest import MANIFEST_NAME, package_files, verify

SCAN_BYTES = 64 << 20
"""Files larger than this are not scanned for secrets (bench artifacts, not text we wrote)."""


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    check = sub.add_parser(
        "verify", parents=[common], help="re-hash a package against its manifest"
    )
    check.add_argument("package", metavar="PACKAGE")
    check.add_argument("--json", action="store_true", help="one JSON object")


def run(args: argparse.Namespace) -> int:
    return cmd_verify(args)


def _say(text: str) -> None:
    out.print(text, soft_wrap=True)  # paths are copied from here: never break them


def secrets_left(root: Path) -> list[tuple[str, int]]:
    """(file, line) of every secret-looking value still in the package's text files."""
    found: list[tuple[str, int]] = []
    for rel in package_files(root):
        path = root / rel
        try:
            if path.stat().st_size > SCAN_BYTES:
                continue
            text = path.read_bytes().decode("utf-8", "replace")
        except OSError:
            continue  # reported as missing or unreadable by the hash check
        found.extend((rel, line) for line in unredacted(text))
    return found


def cmd_verify(args: argparse.Namespace) -> int:
    root = Path(args.package).expanduser()
    if not root.is_dir():
        err.print(f"specops: {root}: not a directory", markup=False, soft_wrap=True)
        return EXIT_USAGE
    try:
        report = verify(root)
    except FileNotFoundError:
        err.print(
            f"specops: {root / MANIFEST_NAME}: no manifest to verify against",
            markup=False,
            soft_wrap=True,
        )
        return EXIT_FAILED
    except OSError as exc:
        err.print(f"specops: {root}: {exc}", markup=False, soft_wrap=True)
        return EXIT_FAILED
    problems = [
        *(("mismatched", p) for p in report.mismatched),
        *(("missing", p) for p in report.missing),
        *(("unlisted", p) for p in report.unlisted),
        *(("malformed", f"line {m.lineno}: {m.reason}: {m.text}") for m in report.malformed),
    ]
    secrets = secrets_left(root)
    if args.json:
        record = {
            "package": str(root),
            "ok": len(report.ok),
            "mismatched": list(report.mismatched),
            "missing": list(report.missing),
            "unlisted": list(report.unlisted),
            "malformed": [
                {"line": m.lineno, "text": m.text, "reason": m.reason} for m in report.malformed
            ],
            "clean": report.clean,
            "unredacted_secrets": [{"path": p, "line": n} for p, n in secrets],
        }
        print(json.dumps(record), flush=True)
    else:
        for kind, what in problems:
            _say(f"{kind.upper():<11} {escape(what)}")
        for rel, line in secrets:  # a warning: the hashes may still be right
            _say(f"{'WARNING':<11} {escape(rel)}:{line}: a secret-looking value is not redacted")
        summary = f"{len(report.ok)} files OK"
        if problems:
            summary = f"{len(problems)} problem(s); {summary}"
        _say(f"{escape(str(root))}: {summary}")
    return EXIT_OK if report.clean else EXIT_FAILED
