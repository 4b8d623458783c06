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

from rich.markup import escape
from rich.table import Table

from console.cli.common import EXIT_FAILED, EXIT_OK, EXIT_USAGE, connect, err, load_profiles, out
from console.evidence.compare import (
    Configuration,
    Delta,
    best,
    compare,
    configurations,
    default_pair,
)
from console.evidence.ledger import (
    SERIES,
    Experiment,
    WindowStats,
    current_invocation,
    load,
    measure,
)
from console.profiles import select
from console.transport.ssh import RemoteError

LABELS = {
    "accept_len": "accept len",
    "accept_rate": "accept rate",
    "gen_throughput": "tok/s",
    "running_req": "running",
    "queue_req": "queued",
}


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


def _stats(w: WindowStats | None, fmt: str = "{:.2f}") -> str:
    if w is None:
        return "-"
    return f"{fmt.format(w.mean)} ± {fmt.format(w.stddev)} (n={w.count})"


def _fmt(name: str) -> str:
    return "{:.0f}" if name == "gen_throughput" else "{:.2f}"


def _record(
    configs: list[Configuration], pair: tuple[Configuration, Configuration] | None, note: str
) -> dict[str, Any]:
    top = best(configs)

    def window(w: WindowStats | None) -> dict[str, Any] | None:
        return dataclasses.asdict(w) if w is not None else None

    return {
        "configurations": [
            {
                "number": c.number,
                "flags": dict(c.flags),
                "status": c.status,
                "rolled_back": bool(c.rolled_back),
                "runs": [
                    {
                        "experiment": r.experiment,
                        "role": r.role,
                        "outcome": r.outcome,
                        "invocation": r.side.invocation,
                        "window": r.side.window,
                    }
                    for r in c.runs
                ],
                "windows": {name: window(c.window(name)) for name in SERIES},
            }
            for c in configs
        ],
        "best": top.number if top else None,
        "a": pair[0].number if pair else None,
        "b": pair[1].number if pair else None,
        "deltas": [
            {
                "series": d.name,
                "delta": d.delta,
                "spread": d.spread,
                "beyond_spread": d.beyond_spread,
            }
            for d in (compare(*pair) if pair else [])
        ],
        "note": note,
    }


def _print(
    configs: list[Configuration], pair: tuple[Configuration, Configuration] | None, note: str
) -> None:
    top = best(configs)
    table = Table(
        "#", "configuration", "status", "runs", "accept len", "tok/s", title="configurations"
    )
    for c in configs:
        mark = " (best)" if top is c else ""
        table.add_row(
            str(c.number),
            escape(c.key) + mark,
            escape(c.status),
            str(len(c.invocations)),
            _stats(c.window("accept_len")),
            _stats(c.window("gen_throughput"), "{:.0f}"),
        )
    out.print(table)
    if pair is not None:
        a, b = pair
        side = Table(
            "",
            f"A: #{a.number}",
            f"B: #{b.number}",
            "Δ (B − A)",
            "2·SE",
            "beyond spread",
            title=f"#{a.number} {escape(a.key)}  →  #{b.number} {escape(b.key)}",
        )
        for d in compare(a, b):
            fmt = _fmt(d.name)
            side.add_row(
                LABELS[d.name],
                _stats(d.a, fmt),
                _stats(d.b, fmt),
                "-" if d.delta is None else f"{d.delta:+.2f}",
                "-" if d.spread is None else f"{d.spread:.2f}",
                _beyond(d),
            )
        out.print(side)
    out.print(
        f"best: #{top.number} {escape(top.key)}"
        if top
        else "best: none (every tried configuration was rolled back)"
    )
    if note:
        out.print(note, style="dim")


def _beyond(d: Delta) -> str:
    if d.beyond_spread is None:
        return "-"
    return "yes" if d.beyond_spread else "no (within noise)"


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
        print(json.dumps(_record(configs, pair, note)), flush=True)
    else:
        _print(configs, pair, note)
    return EXIT_OK
