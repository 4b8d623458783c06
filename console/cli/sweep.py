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
import socket
import sys
import time
from typing import Any

from rich.markup import escape
from rich.table import Table

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
from console.hosts.events import RolloutEvent, RolloutProgress
from console.hosts.profiles import FlagValue, select
from console.ledger import campaigns
from console.ledger.campaigns import Campaign, CampaignError, Cell, cell_text
from console.service.execline import FlagError
from console.service.flags import format_value
from console.service.status import read_status
from console.transport.ssh import Disconnected, HostSession, RemoteError
from console.tuning import bench_step, history
from console.tuning import campaign as grids
from console.tuning.sweep import LinkLost, Sweep, SweepEvent, SweepProgress, new_campaign

OUTCOME_STYLE = {
    "measured": "green",
    "baseline": "cyan",
    "crashed": "red",
    "failed": "bold red",
    "skipped": "dim",
}


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
    (profile,) = select(load_profiles(args), [args.host])
    if refuse_read_only(args, profile.name):
        return EXIT_USAGE
    grid: dict[str, list[FlagValue]] = {}
    if args.resume is None:
        try:
            grid = grids.parse_grid(profile, args.axes)
            args.bench_argv = None if args.bench is None else bench_step.bench_argv(args.bench)
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
    unit = profile.service.unit
    existing = await campaigns.load_all(session, unit)
    if args.resume is not None:
        campaign = await campaigns.load(session, unit, args.resume)
        _may_resume(campaign, time.time())
    else:
        status = await read_status(session)
        start = {k: v for k, v in status.flags.items() if k not in profile.secret_names}
        campaign = new_campaign(
            session,
            grid,
            start,
            soak_s=args.soak,
            measure_s=args.measure,
            keep=args.keep,
            prune=not args.no_prune,
            bench=args.bench_argv,
            bench_timeout_s=args.bench_timeout,
        )
    held = campaigns.holder(existing, time.time(), mine=campaign.id)
    if held is not None:
        raise CampaignError(
            f"campaign {held.id} of {held.owner or '?'} owns this host (running, its record "
            f"rewritten {time.time() - held.updated_at:.0f}s ago); it counts as abandoned "
            f"{campaigns.STALE_LOCK_S:.0f}s after its last write"
        )
    entries = await history.load(session, unit)
    soak_s = profile.service.soak_s if campaign.soak_s is None else campaign.soak_s
    per_cell = grids.cell_seconds(entries, soak_s, campaign.measure_s)
    _show_plan(campaign, per_cell)
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
    _show_results(ended)
    if args.json:
        print(json.dumps(result_record(ended), default=str), flush=True)
    return EXIT_OK if ended.state in ("finished", "stopped") else EXIT_FAILED


def _may_resume(campaign: Campaign, now: float) -> None:
    """A campaign goes on only when no live console runs it: finished ones never, a running
    one when its console is gone (this machine's, not running) or its lock went stale."""
    if campaign.state == "finished":
        raise CampaignError(f"campaign {campaign.id} finished already ({campaign.end})")
    if campaign.state != "running" or campaign.stale(now):
        return
    owner = campaign.owner.rpartition("@")[2]
    pid = campaign.owner_pid
    if owner == socket.gethostname() and pid is not None and not _alive(pid):
        return
    raise CampaignError(
        f"campaign {campaign.id} is running from {campaign.owner or '?'} (pid {pid}); it can be "
        f"resumed once that console has stopped, or {campaigns.STALE_LOCK_S:.0f}s after the "
        "record's last write"
    )


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _show_plan(campaign: Campaign, per_cell: float) -> None:
    left = [c for c in campaign.cells if c.outcome == "pending"]
    axes = "  ".join(
        f"{k}={','.join(format_value(x) for x in v)}" for k, v in campaign.grid.items()
    )
    minutes = (len(left) * per_cell + campaign.measure_s) / 60
    out.print(
        f"{campaign.host}: campaign {campaign.id}: {escape(axes)}: {len(campaign.cells)} cells"
        + (f" ({len(left)} left)" if len(left) != len(campaign.cells) else ""),
        soft_wrap=True,
    )
    out.print(
        f"  starts from {escape(cell_text(campaign.start))}; about {minutes:.0f} min "
        f"(~{per_cell:.0f}s a cell: restart, soak, {campaign.measure_s:g}s measured); "
        f"ends on {'the fastest cell' if campaign.keep == 'best' else 'that configuration'}",
        soft_wrap=True,
    )
    for n, cell in enumerate(campaign.cells, start=1):
        mark = "" if cell.outcome == "pending" else f"  ({cell.outcome})"
        out.print(f"  {n:>3}  {escape(cell_text(cell.values))}{mark}", soft_wrap=True)


class CellPrinter:
    """A line per cell as it ends; the current step of a change on a terminal's status line."""

    def __init__(self, campaign: Campaign) -> None:
        self.campaign = campaign
        self.tty = sys.stderr.isatty()
        self._status: Any = None
        self._cell = ""

    def __call__(self, event: SweepEvent) -> None:
        if not isinstance(event, SweepProgress):
            return
        where = "baseline" if event.index is None else f"cell {event.index + 1}/{event.total}"
        self._cell = f"{where} {cell_text(event.cell.values)}"
        if event.phase in ("changing", "measuring", "benchmarking", "ending"):
            self._show(f"{self._cell}: {event.phase}")
            return
        self.stop()
        cell = event.cell
        style = OUTCOME_STYLE.get(cell.outcome, "")
        text = f"{where}  [{style}]{cell.outcome}[/{style}]  {escape(cell_text(cell.values))}"
        if cell.tok_s is not None:
            text += f"  accept {cell.accept_len or 0:.2f}  {cell.tok_s:.0f} tok/s (n={cell.n})"
        if cell.bench_tok_s is not None:
            text += f"  bench {cell.bench_tok_s:.0f} tok/s"
        elif cell.bench_detail:
            text += f"  [dim]bench: {escape(cell.bench_detail)}[/dim]"
        if cell.reason and cell.outcome != "measured":
            text += f"  [dim]{escape(cell.reason)}[/dim]"
        err.print(text, soft_wrap=True)

    def rollout(self, event: RolloutEvent) -> None:
        if isinstance(event, RolloutProgress) and event.state in ("running", "waiting"):
            back = "rollback: " if event.rollback else ""
            self._show(f"{self._cell}: {back}{event.step.value} {event.detail}")

    def _show(self, text: str) -> None:
        if not self.tty:
            return
        if self._status is None:
            self._status = err.status(escape(text))
            self._status.start()
        else:
            self._status.update(escape(text))

    def stop(self) -> None:
        if self._status is not None:
            self._status.stop()
            self._status = None


def _show_results(campaign: Campaign) -> None:
    table = Table(title=f"{campaign.host} · campaign {campaign.id} · {campaign.state}")
    benched = bool(campaign.bench)
    columns = ["cell", "flags", "outcome", "accept len", "tok/s", "speedup"]
    columns += ["bench tok/s"] if benched else []
    for column in [*columns, "why"]:
        table.add_column(column, overflow="fold")
    rows = [("base", campaign.baseline)] if campaign.baseline else []
    rows += [(str(n), c) for n, c in enumerate(campaign.cells, start=1)]
    for label, cell in rows:
        assert cell is not None
        style = OUTCOME_STYLE.get(cell.outcome, "")
        accept = "-"
        if cell.accept_len is not None:
            accept = f"{cell.accept_len:.2f} ±{cell.accept_len_sd or 0:.2f}"
        tps = "-" if cell.tok_s is None else f"{cell.tok_s:.0f} ±{cell.tok_s_sd or 0:.0f}"
        why = cell.signature or ("" if cell.outcome == "measured" else cell.reason)
        shown = {k: v for k, v in cell.values.items() if k in campaign.grid}
        bench = []
        if benched:
            number = "-"
            if cell.bench_tok_s is not None:
                number = f"{cell.bench_tok_s:.0f} {campaign.speedup_text(cell, bench=True)}"
            bench = [number]
            why = why or cell.bench_detail if cell.bench_tok_s is None else why
        table.add_row(
            label,
            cell_text(shown),
            f"[{style}]{cell.outcome}[/{style}]" if style else cell.outcome,
            accept,
            tps,
            campaign.speedup_text(cell),
            *bench,
            escape(why[:80]),
        )
    out.print(table)
    best = campaign.best()
    if best is not None:
        out.print(f"best stable: {escape(cell_text(best.values))} ({best.tok_s:.0f} tok/s)")
    out.print(f"{campaign.host}: {escape(campaign.end)}", soft_wrap=True)


def result_record(campaign: Campaign) -> dict[str, Any]:
    """`--json`: the campaign as one object."""

    def cell(c: Cell) -> dict[str, Any]:
        return {
            "flags": c.values,
            "outcome": c.outcome,
            "stage": c.stage,
            "signature": c.signature,
            "reason": c.reason,
            "accept_len": c.accept_len,
            "accept_len_sd": c.accept_len_sd,
            "tok_s": c.tok_s,
            "tok_s_sd": c.tok_s_sd,
            "n": c.n,
            "speedup": campaign.speedup(c),
            "bench_tok_s": c.bench_tok_s,
            "bench_speedup": campaign.speedup(c, bench=True),
            "bench_detail": c.bench_detail,
            "bench_file": c.bench_file,
            "history_entry": c.history_entry,
        }

    best = campaign.best()
    return {
        "campaign": campaign.id,
        "host": campaign.host,
        "unit": campaign.unit,
        "state": campaign.state,
        "grid": campaign.grid,
        "start": campaign.start,
        "keep": campaign.keep,
        "bench": campaign.bench,
        "end": campaign.end,
        "baseline": cell(campaign.baseline) if campaign.baseline else None,
        "cells": [cell(c) for c in campaign.cells],
        "best": best.values if best else None,
        "path": campaigns.campaign_path(campaign.unit, campaign.id),
    }
