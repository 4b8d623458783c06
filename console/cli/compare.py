"""`specops compare HOST [A B] [--json] [--offline]`: configurations side by side.

From the experiment ledger (console/evidence/ledger.py): every configuration the host ran
around a change, its status (kept, rolled back with why), and its pooled numbers; then two of
them (by default the newest change's before and after) with the deltas and whether each is
larger than the run-to-run spread (console/evidence/compare.py). Unless `--offline`, the run
the newest change left running is measured again from its journal first, so its window covers
everything since its first decode line, not just the rollout's last seconds.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
from typing import Any

from console.cli.common import EXIT_FAILED, EXIT_OK, EXIT_USAGE, connect, err, load_profiles, out
from console.evidence.compare import (
    Configuration,
    configurations,
    default_pair,
)
from console.evidence.compare_view import compare_record, render_compare
from console.evidence.ledger import (
    Experiment,
    current_invocation,
    load,
    measure,
)
from console.profiles import select
from console.transport.ssh import RemoteError


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    cmd = sub.add_parser(
        "compare", parents=[common], help="configurations side by side, from the ledger"
    )
    cmd.add_argument("host", metavar="HOST")
    cmd.add_argument("pair", nargs="*", metavar="A B", help="two configuration numbers")
    cmd.add_argument("--json", action="store_true", help="one JSON object")
    cmd.add_argument("--offline", action="store_true", help="do not re-measure on the host")


def run(args: argparse.Namespace) -> int:
    return asyncio.run(cmd_compare(args))


async def _refresh(args: argparse.Namespace, experiments: list[Experiment]) -> str:
    """Re-measure the newest kept change's run if it is still the one running; a note."""
    last = experiments[-1]
    if not last.kept or not last.after.invocation:
        return ""
    (profile,) = select(load_profiles(args), [args.host])
    session = await connect(profile)
    if session is None:
        return "host unreachable: numbers as recorded"
    try:
        if await current_invocation(session) != last.after.invocation:
            return "the newest change's run has ended: numbers as recorded"
        windows = await measure(session, last.unit, last.after.invocation)
    except RemoteError as exc:
        return f"not re-measured ({exc}): numbers as recorded"
    finally:
        await session.close()
    after = dataclasses.replace(
        last.after, windows=windows, window="from its first decode line until now"
    )
    experiments[-1] = dataclasses.replace(last, after=after)
    return "the running configuration was measured again from its journal"


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
    experiments = [e for _, e in load(args.host)]
    if not experiments:
        err.print(f"specops: {args.host}: no experiments recorded yet (`specops set` records one)")
        return EXIT_FAILED
    note = "" if args.offline else await _refresh(args, experiments)
    configs = configurations(experiments)
    try:
        pair = _pick(configs, args.pair) if args.pair else default_pair(experiments, configs)
    except ValueError as exc:
        err.print(f"specops: {exc}", markup=False)
        return EXIT_USAGE
    if args.json:
        print(json.dumps(compare_record(configs, pair, note)), flush=True)
    else:
        out.print(render_compare(configs, pair, note))
    return EXIT_OK
