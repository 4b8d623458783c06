"""`specops rollback HOST [HOST…] [--to N | --original] [--yes] [--dry-run]`: back to a good
configuration (several hosts or `--group G`: in waves, console/cli/group_set.py).

The target comes from the host's own history (console/tuning/rollback.py, shared with the
TUI): by default the newest configuration that survived its soak and is not what runs now;
`--to N` any entry; `--original` the unit with no specops drop-in. It then goes through
exactly what `set` does: the diff, the build check, confirmation, then the one path of every
change (console/tuning/change.py), named `rollback` in the history, the audit and the ledger.
A secret flag (`secret = true`) keeps the value it has now: the history holds it masked.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from typing import Any

from rich.markup import escape

from console.cli.common import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
    connect,
    err,
    human_to_stderr,
    load_profiles,
    out,
    refuse_read_only,
)
from console.cli.group_set import (
    add_group_arguments,
    group_profiles,
    rolling_back,
    run_group,
)
from console.cli.set import run_plan, soak_seconds, unchanged
from console.hosts.events import ChangeAction
from console.hosts.profiles import select
from console.service.execline import FlagError
from console.transport.ssh import Disconnected, HostSession, RemoteError
from console.tuning.history import HistoryError
from console.tuning.plan import Plan
from console.tuning.rollback import RollbackError, read_rollback


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    cmd = sub.add_parser(
        "rollback",
        parents=[common],
        help="back to the previous good configuration (from the host's history)",
    )
    cmd.add_argument(
        "hosts",
        nargs="*",
        metavar="HOST",
        help="several hosts (or --group G) go back in waves, each to its own previous good "
        "configuration: a canary, then --wave",
    )
    add_group_arguments(cmd)
    target = cmd.add_mutually_exclusive_group()
    target.add_argument("--to", type=int, metavar="N", help="history entry N instead")
    target.add_argument(
        "--original", action="store_true", help="the unit's own configuration (no drop-in)"
    )
    cmd.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    cmd.add_argument("--dry-run", action="store_true", help="show the diff; change nothing")
    cmd.add_argument("--soak", type=soak_seconds, metavar="S", help="as for `specops set`")
    cmd.add_argument("--json", action="store_true", help="the outcome as one JSON object on stdout")
    cmd.set_defaults(no_rollback=False)


def run(args: argparse.Namespace) -> int:
    return asyncio.run(cmd_rollback(args))


async def cmd_rollback(args: argparse.Namespace) -> int:
    if args.to is not None and args.to < 0:
        err.print(f"specops: --to {args.to}: history entries are numbered from 0")
        return EXIT_USAGE
    if not args.hosts and not getattr(args, "group", None):
        err.print("specops: which host? name it, or several, or --group G")
        return EXIT_USAGE
    if len(args.hosts) > 1 or getattr(args, "group", None):
        profiles = group_profiles(args, args.hosts)
        if profiles is None:
            return EXIT_USAGE
        with human_to_stderr(args.json):
            return await run_group(profiles, rolling_back(args), args, action=ChangeAction.ROLLBACK)
    (profile,) = select(load_profiles(args), args.hosts)
    if refuse_read_only(args, profile.name):
        return EXIT_USAGE
    session = await connect(profile)
    if session is None:
        return EXIT_UNREACHABLE
    try:
        with human_to_stderr(args.json):
            plan = await _plan(session, args)
            if plan is None:
                return EXIT_FAILED
            if not plan.changed:
                out.print(f"{profile.name}: already on that configuration ({plan.summary()})")
                if args.json:
                    print(json.dumps(unchanged(profile.name, ChangeAction.ROLLBACK, plan)))
                return EXIT_OK
            return await run_plan(session, plan, args, action=ChangeAction.ROLLBACK)
    except Disconnected as exc:
        err.print(f"specops: {exc}", markup=False)
        return EXIT_UNREACHABLE
    except (HistoryError, RemoteError, FlagError) as exc:
        err.print(f"specops: {profile.name}: {exc}", markup=False)
        return EXIT_FAILED
    finally:
        await session.close()


async def _plan(session: HostSession, args: argparse.Namespace) -> Plan | None:
    try:
        found = await read_rollback(session, to=args.to, original=args.original)
    except RollbackError as exc:
        err.print(f"specops: {exc}", markup=False)
        return None
    out.print(f"{session.profile.name}: {escape(found.label)}", soft_wrap=True)
    return found.plan
