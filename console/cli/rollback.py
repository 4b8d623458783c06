"""`specops rollback HOST [--to N | --original] [--yes] [--dry-run]`: back to a good configuration.

The target comes from the host's own history (console/tuning/history.py): by default the
newest configuration that survived its soak and is not what runs now; `--to N` any entry;
`--original` the unit with no specops drop-in. It then goes through exactly what `set` does:
the diff, the build check, confirmation, restart, health, smoke and soak, with its own
history entry (kind "rollback").
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from rich.markup import escape

from console.cli.common import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
    connect,
    err,
    load_profiles,
    out,
    read_only_reason,
)
from console.cli.set import run_plan, soak_seconds
from console.profiles import select
from console.service.execline import FlagError
from console.transport import remote
from console.transport.ssh import Disconnected, HostSession, RemoteError
from console.tuning import history
from console.tuning.history import HistoryError
from console.tuning.plan import Plan, make_plan, original_plan
from console.tuning.probation import entry_plan


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    cmd = sub.add_parser(
        "rollback",
        parents=[common],
        help="back to the previous good configuration (from the host's history)",
    )
    cmd.add_argument("host", metavar="HOST")
    target = cmd.add_mutually_exclusive_group()
    target.add_argument("--to", type=int, metavar="N", help="history entry N instead")
    target.add_argument(
        "--original", action="store_true", help="the unit's own configuration (no drop-in)"
    )
    cmd.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    cmd.add_argument("--dry-run", action="store_true", help="show the diff; change nothing")
    cmd.add_argument("--soak", type=soak_seconds, metavar="S", help="as for `specops set`")
    cmd.set_defaults(no_rollback=False)


def run(args: argparse.Namespace) -> int:
    return asyncio.run(cmd_rollback(args))


async def cmd_rollback(args: argparse.Namespace) -> int:
    (profile,) = select(load_profiles(args), [args.host])
    read_only = read_only_reason(args)
    if read_only is not None and not args.dry_run:
        err.print(
            f"specops: refusing to change {profile.name}: {read_only} (try --dry-run)",
            markup=False,
            soft_wrap=True,
        )
        return EXIT_USAGE
    if args.to is not None and args.to < 0:
        err.print(f"specops: --to {args.to}: history entries are numbered from 0")
        return EXIT_USAGE
    session = await connect(profile)
    if session is None:
        return EXIT_UNREACHABLE
    try:
        plan = await _plan(session, args)
        if plan is None:
            return EXIT_FAILED
        if not plan.changed:
            out.print(f"{profile.name}: already on that configuration ({plan.summary()})")
            return EXIT_OK
        return await run_plan(session, plan, args, kind="rollback")
    except Disconnected as exc:
        err.print(f"specops: {exc}", markup=False)
        return EXIT_UNREACHABLE
    except (HistoryError, RemoteError, FlagError) as exc:
        err.print(f"specops: {profile.name}: {exc}", markup=False)
        return EXIT_FAILED
    finally:
        await session.close()


async def _plan(session: HostSession, args: argparse.Namespace) -> Plan | None:
    profile = session.profile
    unit = profile.service.unit
    cat = (await session.run(remote.systemctl_cat(unit), timeout=30)).stdout
    if args.original:
        out.print(f"{profile.name}: back to the unit's own configuration (no specops drop-in)")
        return original_plan(profile, cat)
    entries = await history.load(session, unit)
    if not entries:
        entries = [history.original_entry(profile, cat, original_plan(profile, cat).dropin_path)]
    if args.to is not None:
        target = next((e for e in entries if e.n == args.to), None)
        if target is None:
            numbers = ", ".join(str(e.n) for e in entries)
            err.print(f"specops: {profile.name}: no history entry {args.to} (there are {numbers})")
            return None
    else:
        current = make_plan(profile, cat, {}).old_values
        target = history.rollback_target(entries, current)
        if target is None:
            err.print(f"specops: {profile.name}: no earlier good configuration in its history")
            return None
    out.print(
        f"{profile.name}: back to history entry {target.n} ({target.outcome}, "
        f"{escape(target.who or '?')})",
        soft_wrap=True,
    )
    return entry_plan(profile, cat, target)
