"""`specops manifest PACKAGE [--dry-run]`: rewrite MANIFEST.sha256 after hand edits.

An operator who adds a report of their own to a package, or edits one, used to regenerate the
manifest by hand (`find … | sort | xargs sha256sum`). This lists what was added, changed and
removed against the manifest the package had, then writes the same deterministic manifest a
snapshot writes, so `sha256sum -c MANIFEST.sha256` passes afterwards.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from rich.markup import escape

from console.cli.common import EXIT_FAILED, EXIT_OK, EXIT_USAGE, err, out
from console.package.manifest import MANIFEST_NAME, ManifestChanges, refresh_manifest


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    cmd = sub.add_parser(
        "manifest",
        parents=[common],
        help="rewrite a package's MANIFEST.sha256 after hand edits",
    )
    cmd.add_argument("package", metavar="PACKAGE")
    cmd.add_argument("--dry-run", action="store_true", help="list the changes, write nothing")
    cmd.add_argument("--json", action="store_true", help="one JSON object")


def run(args: argparse.Namespace) -> int:
    root = Path(args.package).expanduser()
    if not root.is_dir():
        err.print(f"specops: {root}: not a directory", markup=False, soft_wrap=True)
        return EXIT_USAGE
    try:
        changes = refresh_manifest(root, dry_run=args.dry_run)
    except OSError as exc:
        err.print(f"specops: {root}: {exc}", markup=False, soft_wrap=True)
        return EXIT_FAILED
    if args.json:
        print(json.dumps(_record(root, changes, args.dry_run)), flush=True)
    else:
        _print(root, changes, args.dry_run)
    return EXIT_OK


def _record(root: Path, changes: ManifestChanges, dry_run: bool) -> dict[str, Any]:
    return {
        "package": str(root),
        "added": list(changes.added),
        "changed": list(changes.changed),
        "removed": list(changes.removed),
        "unchanged": changes.unchanged,
        "malformed": [
            {"line": m.lineno, "text": m.text, "reason": m.reason} for m in changes.malformed
        ],
        "had_manifest": changes.had_manifest,
        "written": changes.written,
        "dry_run": dry_run,
    }


def _print(root: Path, changes: ManifestChanges, dry_run: bool) -> None:
    def say(text: str) -> None:
        out.print(text, soft_wrap=True)  # paths are copied from here: never break them

    for kind, paths in (
        ("added", changes.added),
        ("changed", changes.changed),
        ("removed", changes.removed),
    ):
        for path in paths:
            say(f"{kind.upper():<8} {escape(path)}")
    for line in changes.malformed:
        say(f"DROPPED  line {line.lineno}: {escape(line.reason)}: {escape(line.text)}")
    counts = (
        f"{len(changes.added)} added, {len(changes.changed)} changed, "
        f"{len(changes.removed)} removed, {changes.unchanged} unchanged"
    )
    manifest = escape(str(root / MANIFEST_NAME))
    if dry_run:
        verb = "would be rewritten" if changes.any else "is up to date"
        say(f"{manifest} {verb} ({counts}); --dry-run: nothing written")
    elif changes.written:
        say(f"{manifest} rewritten ({counts})")
    else:
        say(f"{manifest} is up to date ({counts})")
