"""`specops sweep HOST HOST… NAME=V1,V2…` or `--group G`: one grid on several hosts at once.

Without `--split` every host runs the whole grid (its own campaign, baseline and lock), all
at once; cells measured on different hosts are never put in one table. With `--split` the
hosts must run one SGLang release and have the same GPUs (else exit 2, naming them; a host
without nvidia-smi is noted, not refused) and the cells are dealt out
among them (host i takes cells i, i+n, …): n hosts take about 1/n of the time. A crash on
any of them prunes, for all, the cells only further along the flag that crashed. Each host
still measures its own baseline, and its speedups are against it. Everything is refused
before a host is touched: a bad grid (2), an unreachable host (3), a lock held (1).
Exit 0 when every campaign finished, 1 when one could not return its host, 3 when a link was
lost (each host's record says where it stopped).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os

from rich.markup import escape

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
from console.cli.sweep_output import CellPrinter, result_record, show_plan, show_results
from console.cli.sweep_start import parse_grid, prepare_campaign
from console.hosts.profiles import FlagValue, select
from console.ledger.campaigns import Campaign, CampaignError
from console.service.execline import FlagError
from console.service.gpu_model import read_gpu_model, unlike
from console.service.status import read_status
from console.transport.ssh import Disconnected, HostSession, RemoteError
from console.tuning import bench_step, history
from console.tuning.sweep import LinkLost, Sweep


async def sweep_many(args: argparse.Namespace, hosts: list[str]) -> int:
    everyone = load_profiles(args)  # --group already kept only the group's hosts
    profiles = select(everyone, hosts) if hosts else everyone
    if refuse_read_only(args, ", ".join(p.name for p in profiles)):
        return EXIT_USAGE
    if args.resume is not None:
        err.print("specops: --resume goes on with one host's campaign: name that host only")
        return EXIT_USAGE
    grids: dict[str, dict[str, list[FlagValue]]] = {}
    for profile in profiles:
        try:
            grids[profile.name] = parse_grid(profile, args)
        except (FlagError, bench_step.BenchCommandError) as exc:
            err.print(f"specops: {profile.name}: {exc}", markup=False, soft_wrap=True)
            return EXIT_USAGE
    connected = await asyncio.gather(*(connect(p) for p in profiles))
    sessions = [s for s in connected if s is not None]
    try:
        if len(sessions) < len(profiles):
            missing = [p.name for p in profiles if p.name not in {s.name for s in sessions}]
            err.print(f"specops: no campaign started: {', '.join(missing)} unreachable")
            return EXIT_UNREACHABLE
        with human_to_stderr(args.json):
            return await _run(sessions, grids, args)
    except (Disconnected, LinkLost) as exc:
        err.print(f"specops: the link was lost: {exc}", markup=False)
        return EXIT_UNREACHABLE
    except (CampaignError, history.HistoryError, RemoteError) as exc:
        err.print(f"specops: {exc} (no campaign started)", markup=False, soft_wrap=True)
        return EXIT_FAILED
    finally:
        await asyncio.gather(*(s.close() for s in sessions))


async def _run(
    sessions: list[HostSession],
    grids: dict[str, dict[str, list[FlagValue]]],
    args: argparse.Namespace,
) -> int:
    if args.split:
        statuses = [await read_status(s, with_flags=False, with_version=True) for s in sessions]
        releases = {s.host: s.sglang_version or "unknown" for s in statuses}
        if len(set(releases.values())) > 1:
            listed = ", ".join(f"{h} {r}" for h, r in releases.items())
            err.print(
                f"specops: --split needs one SGLang release ({listed}): cells measured on "
                "different builds are not one grid; without --split each host runs it all"
            )
            return EXIT_USAGE
        models = dict(
            zip(releases, await asyncio.gather(*map(read_gpu_model, sessions)), strict=True)
        )
        if (gpus := unlike(models)) is not None:
            err.print(
                f"specops: --split needs one GPU model ({gpus}): cells measured on different "
                "hardware are not one grid; without --split each host runs it all"
            )
            return EXIT_USAGE
        if unknown := [h for h, m in models.items() if m is None]:
            err.print(
                f"note: GPU model unknown on {', '.join(unknown)} (no nvidia-smi answered): "
                "the split assumes the hosts' GPUs are alike",
                style="dim",
            )
    prepared = [await prepare_campaign(s, args, grids[s.name]) for s in sessions]
    found = [c for c, _ in prepared]
    if args.split:
        for i, campaign in enumerate(found):
            campaign.cells = campaign.cells[i :: len(found)]
            campaign.split = [s.name for s in sessions]
    for campaign, per_cell in prepared:
        show_plan(campaign, per_cell)
    if args.dry_run:
        out.print("dry run: nothing was changed", style="dim")
        return EXIT_OK
    how = "the grid dealt out among" if args.split else "the whole grid on each of"
    prompt = f"Run {how} {len(found)} hosts? [y/N] "
    if (refused := await confirm(args, prompt, "not started")) is not None:
        return refused

    def crashed() -> list[dict[str, FlagValue]]:
        return [values for c in found for values in c.crashed()]

    printers = [CellPrinter(c, several=True) for c in found]
    sweeps = [
        Sweep(
            session,
            campaign,
            on_event=printer,
            on_rollout=printer.rollout,
            crashed=crashed if args.split else None,
        )
        for session, campaign, printer in zip(sessions, found, printers, strict=True)
    ]
    for campaign in found:
        campaign.owner_pid = os.getpid()
    ended = await asyncio.gather(*(s.run() for s in sweeps), return_exceptions=True)
    return _report(sessions, found, ended, args)


def _report(
    sessions: list[HostSession],
    campaigns: list[Campaign],
    ended: list[Campaign | BaseException],
    args: argparse.Namespace,
) -> int:
    code = EXIT_OK
    for session, campaign, result in zip(sessions, campaigns, ended, strict=True):
        if isinstance(result, LinkLost | Disconnected):
            err.print(
                f"specops: {session.name}: the link was lost: {escape(str(result))}; `specops "
                f"sweep {session.name} --resume {campaign.id}` goes on",
                soft_wrap=True,
            )
            code = EXIT_UNREACHABLE
            continue
        if isinstance(result, BaseException):
            err.print(f"specops: {session.name}: {escape(str(result))}", soft_wrap=True)
            code = code if code == EXIT_UNREACHABLE else EXIT_FAILED
            continue
        show_results(result)
        if result.state not in ("finished", "stopped") and code == EXIT_OK:
            code = EXIT_FAILED
    if args.json:
        records = [
            result_record(c, s.profile.service.state_dir)
            for s, c in zip(sessions, campaigns, strict=True)
        ]
        print(json.dumps({"campaigns": records, "split": args.split}, default=str), flush=True)
    return code
