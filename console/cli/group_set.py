"""`specops set HOST HOST… NAME=VALUE…` and `specops rollback HOST HOST…`: one change to many
hosts, a canary first, then waves (a rollback takes each host back to its own previous good
configuration, or `--to N` / `--original`).

Everything is refused before any host is touched: a bad value (exit 2), an unreachable host
(exit 3), a flag a host's build does not know (exit 2, naming the host), hosts on different
SGLang releases or GPUs (nvidia-smi's names and counts) unless `--mixed`. Then every host's
diff is shown (hosts with the same diff together), the waves, and one confirmation. Each
wave runs the one path of every change on its hosts at once (console/tuning/group.py); the
first host that does not end healthy stops the rollout. The summary names the hosts on the
new setting, those rolled back (with signature and stage) and those never touched; `--json`
prints one object per host, then the rollout's. Exit 0 when every host ended on the new
setting, 1 when the rollout stopped, 3 when a link was lost.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from typing import Any

from rich.markup import escape

from console.cli.common import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
    confirm,
    connect,
    err,
    load_profiles,
    out,
    refuse_read_only,
)
from console.cli.outcome import probation_note, report
from console.hosts.events import ChangeAction, RolloutEvent, RolloutOutcome, RolloutProgress
from console.hosts.profiles import Profile, select
from console.service.execline import FlagError
from console.transport.ssh import HostSession, RemoteError
from console.tuning import group
from console.tuning.group_plan import GroupRefused, Planner, minutes, plan_group
from console.tuning.history import HistoryError
from console.tuning.plan import Plan, parse_assignments, prepare
from console.tuning.rollback import RollbackError, prepare_rollback


def _step(event: RolloutEvent) -> None:
    """Each host's finished steps, one line each, named by host (hosts of a wave interleave)."""
    if not isinstance(event, RolloutProgress) or event.state not in ("ok", "failed"):
        return
    mark = "[green]✓[/green]" if event.state == "ok" else "[red]✗[/red]"
    label = f"{'rollback: ' if event.rollback else ''}{event.step.value}"
    detail = f"  [dim]{escape(event.detail)}[/dim]" if event.detail else ""
    err.print(f"  {escape(event.host)}: {mark} {label}{detail}", soft_wrap=True)


def _wave(event: group.GroupEvent) -> None:
    if isinstance(event, group.WaveStarted):
        err.print(f"wave {event.number}: {', '.join(event.hosts)}", style="bold")


def group_profiles(args: argparse.Namespace, hosts: list[str]) -> list[Profile] | None:
    """The hosts of a rollout over several: those named, else `--group G`'s (which loading
    already kept). None, said on stderr, when it may not run: read-only, a canary under 1."""
    everyone = load_profiles(args)
    profiles = select(everyone, hosts) if hosts else everyone
    if refuse_read_only(args, ", ".join(p.name for p in profiles)):
        return None
    if args.canary < 1:
        err.print(f"specops: --canary {args.canary}: at least 1 host goes first")
        return None
    return profiles


def add_group_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of a change to several hosts (`set` and `rollback`)."""
    parser.add_argument(
        "--canary",
        type=int,
        default=1,
        metavar="N",
        help="with several hosts: how many go first, alone, each through its soak (default 1)",
    )
    parser.add_argument(
        "--wave",
        default="25%",
        metavar="N|P%",
        help="with several hosts: how many change at once after the canary (default 25%%)",
    )
    parser.add_argument(
        "--mixed",
        action="store_true",
        help="with several hosts: allow different SGLang releases and GPU models",
    )
    parser.add_argument(
        "--all-or-nothing",
        action="store_true",
        help="with several hosts: when one fails, also put back the hosts already changed",
    )


def setting(profiles: list[Profile], assignments: list[str]) -> Planner:
    """`set HOST… NAME=VALUE…`: the same values on every host (validated for each profile
    here, before any host is reached; FlagError names the host)."""
    changes = {}
    for profile in profiles:
        try:
            changes[profile.name] = parse_assignments(profile, assignments)
        except FlagError as exc:
            raise FlagError(f"{profile.name}: {exc}") from None
    return lambda session: prepare(session, changes[session.name])


def rolling_back(args: argparse.Namespace) -> Planner:
    """`rollback HOST…`: each host back to its own previous good configuration (or `--to N`,
    `--original`), as its own history says."""

    async def plan(session: HostSession) -> Plan:
        found = await prepare_rollback(session, to=args.to, original=args.original)
        out.print(f"{session.name}: {escape(found.label)}", soft_wrap=True)
        return found.plan

    return plan


async def run_group(
    profiles: list[Profile],
    planner: Planner,
    args: argparse.Namespace,
    *,
    action: ChangeAction = ChangeAction.GROUP_SET,
) -> int:
    try:
        wave = group.wave_size(args.wave)
    except ValueError as exc:
        err.print(f"specops: --wave {exc}", markup=False)
        return EXIT_USAGE
    connected = await asyncio.gather(*(connect(p) for p in profiles))
    sessions = {s.name: s for s in connected if s is not None}
    try:
        if len(sessions) < len(profiles):
            missing = [p.name for p in profiles if p.name not in sessions]
            err.print(f"specops: not changing any host: {', '.join(missing)} unreachable")
            return EXIT_UNREACHABLE
        return await _run(sessions, profiles, planner, wave, args, action)
    finally:
        await asyncio.gather(*(s.close() for s in sessions.values()))


async def _run(
    sessions: dict[str, HostSession],
    profiles: list[Profile],
    planner: Planner,
    wave: Any,
    args: argparse.Namespace,
    action: ChangeAction,
) -> int:
    hosts = [p.name for p in profiles]
    try:
        planned = await plan_group(
            sessions,
            hosts,
            planner,
            canary=args.canary,
            wave=wave,
            mixed=args.mixed,
            soak_s=args.soak,
        )
    except FlagError as exc:
        err.print(f"specops: {exc} (nothing was changed anywhere)", markup=False)
        return EXIT_USAGE
    except GroupRefused as exc:
        err.print(f"specops: {exc}; --mixed to go on", markup=False)
        return EXIT_USAGE
    except (RollbackError, HistoryError, RemoteError) as exc:
        err.print(f"specops: {exc} (nothing was changed anywhere)", markup=False)
        return EXIT_FAILED
    for plan in planned.skipped:
        out.print(f"{plan.host}: already on it ({escape(plan.summary())}); skipped")
    todo = planned.todo
    if not todo:
        return EXIT_OK
    waves = planned.waves
    for diff, hosts in group.same_diffs(todo):
        out.print(f"[bold]{', '.join(hosts)}[/bold]:")
        for line in diff.splitlines():
            style = {"+": "green", "-": "red", "@": "cyan"}.get(line[:1])
            out.print(line, style=style, markup=False, highlight=False, soft_wrap=True)
    for line in planned.wave_lines():
        out.print(f"  {line}")
    out.print(
        f"  about {minutes(planned.estimated_s)} (each host's past changes; a wave lasts as "
        "long as its slowest host)",
        style="dim",
    )
    if args.dry_run:
        out.print("dry run: nothing was changed", style="dim")
        return EXIT_OK
    prompt = f"Apply to {len(todo)} hosts, a wave at a time? [y/N] "
    if (refused := await confirm(args, prompt, "not applied")) is not None:
        return refused
    rollout = group.new_rollout_id()
    ended = await group.group_change(
        sessions,
        waves,
        rollout=rollout,
        soak_s=args.soak,
        on_event=_step,
        on_wave=_wave,
        all_or_nothing=args.all_or_nothing,
        action=action,
    )
    for outcome in [*ended.outcomes, *ended.undone]:
        report(outcome)
    _summary(ended)
    kept = ended.on_new_setting
    windows = {sessions[h].profile.service.probation_s for h in kept}
    probation_note(kept, max(windows, default=0.0), action)
    if args.json:
        for outcome in [*ended.outcomes, *ended.undone]:
            print(json.dumps({"rollout": rollout, **outcome.record()}, default=str))
        print(json.dumps(_record(ended), default=str), flush=True)
    if ended.unreachable or any(o.result.unreachable for o in ended.undone):
        return EXIT_UNREACHABLE
    return EXIT_OK if ended.ok else EXIT_FAILED


def _summary(ended: group.GroupOutcome) -> None:
    out.print(f"rollout {ended.rollout}:", style="bold")
    for line, alarming in ended.summary():
        out.print(f"  {line}", style="red" if alarming else None, markup=False, soft_wrap=True)


def _record(ended: group.GroupOutcome) -> dict[str, Any]:
    return {
        "rollout": ended.rollout,
        "ok": ended.ok,
        "applied": ended.on_new_setting,
        "put_back": [o.host for o in ended.undone if o.ok],
        "not_put_back": [
            *(o.host for o in ended.undone if not o.ok),
            *ended.undo_errors,
        ],
        "rolled_back": [
            o.host for o in ended.outcomes if o.result.outcome is RolloutOutcome.ROLLED_BACK
        ],
        "failed": [o.host for o in ended.outcomes if o.result.outcome is RolloutOutcome.FAILED],
        "untouched": ended.untouched,
        "at": time.time(),
    }
