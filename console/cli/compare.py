"""`specops compare HOST [A B] [--json] [--offline]`: configurations side by side.

From the host's experiment ledger (console/ledger/ledger.py, kept on the host beside its
history, so every console and profile name sees the same): every configuration the host ran
around a change, its status (kept, rolled back with why), and its pooled numbers; then two of
them (by default the newest change's before and after) with the deltas and whether each is
larger than the run-to-run spread (console/findings/compare.py). The run the newest change
left running is measured again from its journal first, so its window covers everything since
its first decode line, not just the rollout's last seconds. `--offline` (or a host that cannot
be reached) reads the console's cached copy instead, and says so.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
from typing import Any

from console.cli.common import EXIT_FAILED, EXIT_OK, EXIT_USAGE, connect, err, load_profiles, out
from console.findings.compare import (
    Configuration,
    configurations,
    default_pair,
)
from console.findings.compare_view import compare_record, render_compare
from console.hosts.profiles import select
from console.ledger.ledger import (
    Experiment,
    cached,
    current_invocation,
    measure,
    read_ledger,
)
from console.transport.ssh import HostSession, RemoteError


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    cmd = sub.add_parser(
        "compare", parents=[common], help="configurations side by side, from the ledger"
    )
    cmd.add_argument("host", metavar="HOST")
    cmd.add_argument("pair", nargs="*", metavar="A B", help="two configuration numbers")
    cmd.add_argument("--json", action="store_true", help="one JSON object")
    cmd.add_argument(
        "--offline", action="store_true", help="the console's cached copy; no host contacted"
    )


def run(args: argparse.Namespace) -> int:
    return asyncio.run(cmd_compare(args))


async def _refresh(session: HostSession, experiments: list[Experiment]) -> str:
    """Re-measure the newest kept change's run if it is still the one running; a note."""
    last = experiments[-1]
    if not last.kept or not last.after.invocation:
        return ""
    try:
        if await current_invocation(session) != last.after.invocation:
            return "the newest change's run has ended: numbers as recorded"
        windows = await measure(session, last.unit, last.after.invocation)
    except RemoteError as exc:
        return f"not re-measured ({exc}): numbers as recorded"
    after = dataclasses.replace(
        last.after, windows=windows, window="from its first decode line until now"
    )
    experiments[-1] = dataclasses.replace(last, after=after)
    return "the running configuration was measured again from its journal"


async def _read(args: argparse.Namespace) -> tuple[list[Experiment], str, str]:
    """(experiments, where they were read, a note on their numbers)."""
    (profile,) = select(load_profiles(args), [args.host])
    if args.offline:
        return *cached(profile.name, "--offline"), ""
    session = await connect(profile)
    if session is None:
        return *cached(profile.name, "host unreachable"), ""
    try:
        experiments, where = await read_ledger(session)
        return experiments, where, await _refresh(session, experiments) if experiments else ""
    finally:
        await session.close()


def _pick(configs: list[Configuration], pair: list[str]) -> tuple[Configuration, Configuration]:
    numbers = {c.number: c for c in configs}
    try:
        a, b = (numbers[int(x)] for x in pair)
    except (ValueError, KeyError):
        known = ", ".join(str(n) for n in numbers)
        raise ValueError(f"A and B are configuration numbers ({known})") from None
    return a, b


async def cmd_compare(args: argparse.Namespace) -> int:
    if args.pair and len(args.pair) != 2:
        err.print("specops: compare takes two configuration numbers, A and B, or none")
        return EXIT_USAGE
    experiments, where, note = await _read(args)
    if not experiments:
        err.print(
            f"specops: {args.host}: no experiments recorded yet in {where} "
            "(`specops set` records one)",
            markup=False,
        )
        return EXIT_FAILED
    note = "; ".join(n for n in (f"read from {where}", note) if n)
    configs = configurations(experiments)
    try:
        pair = _pick(configs, args.pair) if args.pair else default_pair(experiments, configs)
    except ValueError as exc:
        err.print(f"specops: {exc}", markup=False)
        return EXIT_USAGE
    if args.json:
        print(json.dumps({**compare_record(configs, pair, note), "read_from": where}), flush=True)
    else:
        out.print(render_compare(configs, pair, note))
    return EXIT_OK
