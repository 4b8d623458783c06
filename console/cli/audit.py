"""`specops audit`: the remote commands specops ran, newest last."""

from __future__ import annotations

import argparse
from typing import Any

from rich.markup import escape

from console.cli.common import (
    EXIT_OK,
    out,
)
from console.local.audit import ActionRecord, AuditLog, AuditRecord, is_poll


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    audit = sub.add_parser("audit", parents=[common], help="the remote commands run, newest last")
    audit.add_argument("hosts", nargs="*", metavar="HOST")
    audit.add_argument("-n", "--lines", type=int, default=None, help="only the last N")
    audit.add_argument("--json", action="store_true", help="one JSON object per command")
    audit.add_argument(
        "--all", action="store_true", help="also the status polls (systemctl show/cat)"
    )


def run(args: argparse.Namespace) -> int:
    return cmd_audit(args)


def _shown(entry: AuditRecord | ActionRecord, args: argparse.Namespace) -> bool:
    if args.hosts and entry.host not in args.hosts:
        return False
    return args.all or isinstance(entry, ActionRecord) or not is_poll(entry.command)


def cmd_audit(args: argparse.Namespace) -> int:
    records = [r for r in AuditLog().entries() if _shown(r, args)]
    if args.lines is not None:
        records = records[-args.lines :] if args.lines > 0 else []
    for r in records:
        if args.json:
            print(r.to_json(), flush=True)
            continue
        if isinstance(r, ActionRecord):
            out.print(
                f"{r.time}  {r.host}  [bold]{escape(r.action)}[/]  {escape(r.intent)}"
                f"  → {escape(r.outcome)}",
                highlight=False,
                soft_wrap=True,
            )
            continue
        style = "red" if r.exit != 0 and not r.stopped else ""
        out.print(
            f"{r.time}  {r.host}  [{style or 'default'}]{r.status:>9}[/]  {r.duration_s:7.3f}s  "
            f"{escape(r.command)}",
            highlight=False,
            soft_wrap=True,
        )
    return EXIT_OK
