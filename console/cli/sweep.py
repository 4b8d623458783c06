"""`specops sweep HOST NAME=V1,V2... [...]`: a tuning campaign over a grid of flag settings.

The grid is validated before any host is touched (exit 2), then shown with its estimated
duration and confirmed (`--yes` skips the question, `--dry-run` stops there). The baseline
(what runs now) is measured, then every cell goes through the verified change of `set`
(console/tuning/sweep.py) and is measured over `--measure` seconds; a crashed cell is rolled
back, recorded and the campaign goes on. The host ends where it started (`--keep original`)
or on the fastest cell that stayed up (`--keep best`). A table row per cell as it ends; with
`--json` one object at the end. Exit 0 when the campaign finished (crashed cells and all), 1
when the host could not be put on its end state (or a lock refused it), 2 bad input, 3 the
link was lost (the record on the host says where: `--resume ID` goes on from there).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
from typing import Any

from console.cli.common import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
    confirm,
    connect,
    err,
    human_to_stderr,
    load_profiles,
    out,
    refuse_read_only,
)
from console.cli.set import soak_seconds
from console.cli.sweep_many import sweep_many
from console.cli.sweep_output import CellPrinter, result_record, show_plan, show_results
from console.cli.sweep_start import parse_grid, prepare_campaign
from console.hosts.profiles import FlagValue, select
from console.ledger.campaigns import CampaignError
from console.service.execline import FlagError
from console.transport.ssh import Disconnected, HostSession, RemoteError
from console.tuning import bench_step, history
from console.tuning.sweep import LinkLost, Sweep


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    cmd = sub.add_parser(
        "sweep",
        parents=[common],
        help="a tuning campaign: every cell of a grid a verified change, measured",
    )
    cmd.add_argument("host", metavar="HOST")
    cmd.add_argument("axes", nargs="*", metavar="NAME=V1,V2,…")
    cmd.add_argument("--soak", type=soak_seconds, metavar="S", help="as for `specops set`")
    cmd.add_argument(
        "--measure",
        type=soak_seconds,
        default=60.0,
        metavar="S",
        help="seconds of each cell's decode lines measured after its soak (default 60)",
    )
    cmd.add_argument(
        "--keep",
        choices=("original", "best"),
        default="original",
        help="end on the starting configuration (default) or the fastest cell that stayed up",
    )
    cmd.add_argument(
        "--no-prune",
        action="store_true",
        help="also run cells only further along a flag that crashed",
    )
    cmd.add_argument(
        "--bench",
        metavar="CMD",
        help="run CMD on the host after each cell's window, {out} its result file, read back "
        "as a bench file (e.g. 'python3 -m sglang.bench_serving --backend sglang "
        "--output-file {out}')",
    )
    cmd.add_argument(
        "--bench-timeout",
        type=soak_seconds,
        default=bench_step.BENCH_TIMEOUT_S,
        metavar="S",
        help=f"longest a cell's benchmark may run (default {bench_step.BENCH_TIMEOUT_S:g})",
    )
    cmd.add_argument(
        "--split",
        action="store_true",
        help="with several hosts (same SGLang release): deal the cells out among them instead "
        "of each running the whole grid",
    )
    cmd.add_argument("--resume", metavar="ID", help="go on with campaign ID from its next cell")
    cmd.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    cmd.add_argument("--dry-run", action="store_true", help="show the grid; change nothing")
    cmd.add_argument("--json", action="store_true", help="the campaign as one JSON object")


def take_unknown(args: argparse.Namespace, words: list[str]) -> bool:
    """Axes given after an option (`sweep HOST --yes budget=4,8`), which argparse leaves over."""
    if not all("=" in w and not w.startswith("-") for w in words):
        return False
    args.axes = [*args.axes, *words]
    return True


def run(args: argparse.Namespace) -> int:
    return asyncio.run(cmd_sweep(args))


async def cmd_sweep(args: argparse.Namespace) -> int:
    words = [args.host, *args.axes]  # with --group G, HOST is the first NAME=V…
    hosts = [w for w in words if "=" not in w]
    args.axes = [w for w in words if "=" in w]
    if not hosts and not getattr(args, "group", None):
        err.print("specops: which host? name it, or several, or --group G")
        return EXIT_USAGE
    if len(hosts) > 1 or getattr(args, "group", None):
        return await sweep_many(args, hosts)
    if args.split:
        err.print("specops: --split spreads the cells over several hosts: name two or more")
        return EXIT_USAGE
    args.host = hosts[0]
    (profile,) = select(load_profiles(args), [args.host])
    if refuse_read_only(args, profile.name):
        return EXIT_USAGE
    grid: dict[str, list[FlagValue]] = {}
    if args.resume is None:
        try:
            grid = parse_grid(profile, args)
        except (FlagError, bench_step.BenchCommandError) as exc:
            err.print(f"specops: {profile.name}: {exc}", markup=False, soft_wrap=True)
            return EXIT_USAGE
    elif args.axes or args.bench is not None:
        err.print(
            "specops: --resume goes on with the campaign's own grid and bench command: give no "
            "NAME=V… and no --bench"
        )
        return EXIT_USAGE
    session = await connect(profile)
    if session is None:
        return EXIT_UNREACHABLE
    try:
        with human_to_stderr(args.json):
            return await _sweep(session, args, grid)
    except (Disconnected, LinkLost) as exc:
        err.print(f"specops: {profile.name}: the link was lost: {exc}", markup=False)
        err.print(f"the campaign's record on the host says where it stopped: {_resume_hint(args)}")
        return EXIT_UNREACHABLE
    except (CampaignError, history.HistoryError, RemoteError) as exc:
        err.print(f"specops: {profile.name}: {exc}", markup=False, soft_wrap=True)
        return EXIT_FAILED
    finally:
        await session.close()


def _resume_hint(args: argparse.Namespace) -> str:
    return f"specops sweep {args.host} --resume ID (`ls` the campaigns directory for ID)"


async def _sweep(
    session: HostSession, args: argparse.Namespace, grid: dict[str, list[FlagValue]]
) -> int:
    profile = session.profile
    campaign, per_cell = await prepare_campaign(session, args, grid)
    show_plan(campaign, per_cell)
    if args.dry_run:
        out.print("dry run: nothing was changed", style="dim")
        return EXIT_OK
    rest = "the rest of " if campaign.done else ""
    prompt = f"Run {rest}this campaign on {profile.name}? [y/N] "
    if (refused := await confirm(args, prompt, "not started")) is not None:
        return refused
    campaign.owner_pid = os.getpid()
    printer = CellPrinter(campaign)
    sweep = Sweep(session, campaign, on_event=printer, on_rollout=printer.rollout)
    try:
        ended = await sweep.run()
    finally:
        printer.stop()
    show_results(ended)
    if args.json:
        record = result_record(ended, session.profile.service.state_dir)
        print(json.dumps(record, default=str), flush=True)
    return EXIT_OK if ended.state in ("finished", "stopped") else EXIT_FAILED
