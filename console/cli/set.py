"""`specops set HOST NAME=VALUE...`: the whole tuning step as one command.

`set` is the whole tuning step as one command: values are validated before any host is
touched (exit 2), the diff is shown, the build is asked whether it knows the arguments, and
after confirmation the one path every change takes (console/tuning/change.py: rollout,
history, audit, ledger) either ends healthy on it (exit 0) or rolls back and says why, with
the failing journal excerpt (exit 1). Progress goes to stderr step by step; the outcome goes
to stdout (with `--json`, as one JSON object, and everything else to stderr).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import signal
import sys
import time
from collections.abc import Iterator
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
    human_to_stderr,
    load_profiles,
    out,
    refuse_read_only,
)
from console.cli.group_set import add_group_arguments, group_profiles, run_group, setting
from console.cli.outcome import probation_note, report, say
from console.hosts.events import (
    ChangeAction,
    RolloutEvent,
    RolloutOutcome,
    RolloutProgress,
)
from console.hosts.profiles import select
from console.service.execline import FlagError
from console.transport.host_files import state_refused
from console.transport.ssh import Disconnected, HostSession, RemoteError
from console.tuning import history
from console.tuning.change import change
from console.tuning.left_on import LeftOn, read_left_on
from console.tuning.plan import Plan, check_arguments, parse_assignments, read_plan

WAITING_EVERY_S = 15.0
INTERRUPT_CONFIRM_S = 5.0


def soak_seconds(text: str) -> float:
    """`--soak S`: a finite, non-negative number of seconds (at most a day)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0 <= value <= 86400:  # also refuses nan and inf
        raise argparse.ArgumentTypeError(f"{text!r}: must be between 0 and 86400 seconds")
    return value


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    change = sub.add_parser(
        "set",
        parents=[common],
        help="change flags: restart, health check, smoke test, automatic rollback",
    )
    change.add_argument("host", metavar="HOST")
    change.add_argument(
        "assignments",
        nargs="*",
        metavar="[HOST…] NAME=VALUE",
        help="more hosts (words without `=`) make a rollout in waves: a canary, then --wave; "
        "with --group G the group's hosts (then HOST may be the first NAME=VALUE)",
    )
    add_group_arguments(change)
    change.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    change.add_argument("--dry-run", action="store_true", help="show the diff; change nothing")
    change.add_argument(
        "--soak",
        type=soak_seconds,
        metavar="S",
        help="seconds the new invocation must stay up after the smoke test "
        "(default: the profile's service.soak_s)",
    )
    change.add_argument(
        "--no-rollback", action="store_true", help="leave a failing setting in place"
    )
    change.add_argument(
        "--json", action="store_true", help="the outcome as one JSON object on stdout"
    )


def run(args: argparse.Namespace) -> int:
    return asyncio.run(cmd_set(args))


def _print_diff(plan: Plan) -> None:
    for line in plan.diff.splitlines():
        style = {"+": "green", "-": "red", "@": "cyan"}.get(line[:1], "")
        if line.startswith(("+++", "---")):
            style = "bold"
        out.print(line, style=style or None, markup=False, highlight=False, soft_wrap=True)


class ProgressPrinter:
    """Prints each step as it finishes; long waits as a spinner (terminal) or a line a while."""

    def __init__(self) -> None:
        self.tty = sys.stderr.isatty()
        self._status: Any = None
        self._last_wait = 0.0

    def __call__(self, event: RolloutEvent) -> None:
        if not isinstance(event, RolloutProgress):
            return
        label = f"{'rollback: ' if event.rollback else ''}{event.step.value}"
        detail = escape(event.detail)
        if event.state == "waiting":
            text = f"  … {label}: {detail}"
            if self.tty:
                if self._status is None:
                    self._status = err.status(text)
                    self._status.start()
                else:
                    self._status.update(text)
            elif time.monotonic() - self._last_wait >= WAITING_EVERY_S:
                self._last_wait = time.monotonic()
                err.print(text)
            return
        self.stop()
        if event.state == "running":
            return
        mark = {"ok": "[green]✓[/green]", "failed": "[red]✗[/red]"}.get(event.state, "·")
        line = f"  {mark} {label}" + (f"  [dim]{detail}[/dim]" if detail else "")
        err.print(line, soft_wrap=True)

    def stop(self) -> None:
        if self._status is not None:
            self._status.stop()
            self._status = None


async def cmd_set(args: argparse.Namespace) -> int:
    words = [args.host, *args.assignments]
    hosts = [w for w in words if "=" not in w]
    assignments = [w for w in words if "=" in w]
    if not assignments:
        err.print("specops: nothing to set: give at least one NAME=VALUE")
        return EXIT_USAGE
    if not hosts and not args.group:
        err.print("specops: which host? name it, or several, or --group G")
        return EXIT_USAGE
    if len(hosts) > 1 or args.group:
        profiles = group_profiles(args, hosts)
        if profiles is None:
            return EXIT_USAGE
        try:
            planner = setting(profiles, assignments)
        except FlagError as exc:
            err.print(f"specops: {exc}", markup=False)
            return EXIT_USAGE
        with human_to_stderr(args.json):
            return await run_group(profiles, planner, args)
    args.host, args.assignments = hosts[0], assignments
    (profile,) = select(load_profiles(args), [args.host])
    if refuse_read_only(args, profile.name):
        return EXIT_USAGE
    try:
        changes = parse_assignments(profile, args.assignments)
    except FlagError as exc:
        err.print(f"specops: {profile.name}: {exc}", markup=False)
        return EXIT_USAGE
    session = await connect(profile)
    if session is None:
        return EXIT_UNREACHABLE
    try:
        with human_to_stderr(args.json):
            return await _set(session, args, changes)
    except Disconnected as exc:
        err.print(f"specops: {exc}", markup=False)
        return EXIT_UNREACHABLE
    finally:
        await session.close()


async def _set(session: HostSession, args: argparse.Namespace, changes: dict[str, Any]) -> int:
    profile = session.profile
    try:
        plan = await read_plan(session, changes)
    except FlagError as exc:
        err.print(f"specops: {profile.name}: {exc}", markup=False)
        return EXIT_USAGE
    if not plan.changed:
        await _report_abandoned(session, dry_run=args.dry_run)
        say(f"{profile.name}: nothing to change ({escape(plan.summary())})")
        left = await _runs_otherwise(session, plan)
        if left is not None:
            # The files already say so, but a change that did not end never restarted it.
            err.print(
                f"  [yellow]![/yellow] {escape(profile.name)} {escape(left.text())}: the unit "
                f"files already hold what was asked; restarting {escape(plan.unit)} applies "
                "them (specops writes only what differs)",
                soft_wrap=True,
            )
        if args.json:
            print(json.dumps(unchanged(profile.name, ChangeAction.SET, plan)), flush=True)
        return EXIT_OK
    return await run_plan(session, plan, args)


async def _report_abandoned(session: HostSession, *, dry_run: bool) -> None:
    """A change killed half way is reported by the next run, even one with nothing to do."""
    unit = session.profile.service.unit
    try:
        if dry_run:
            entries = [e for e in await history.load(session, unit) if e.outcome == "started"]
        else:
            entries = await history.settle_abandoned(session, unit)
    except (history.HistoryError, RemoteError) as exc:
        err.print(f"{session.profile.name}: {exc}", markup=False)
        return
    for entry in entries:
        note = history.abandoned_note(entry)
        err.print(
            f"[yellow]{session.profile.name}: {escape(note)}[/yellow]; "
            f"`specops history {session.profile.name}` shows it",
            soft_wrap=True,
        )


async def _runs_otherwise(session: HostSession, plan: Plan) -> LeftOn | None:
    """What the host runs, when its main process is not on what its unit files say (a change
    that wrote them and never restarted it); None when it is, or cannot be read."""
    files = plan.masked(plan.old_values)
    left = await read_left_on(session, files)
    if left is None or left.source != "running command" or dict(left.values) == files:
        return None
    return left


def unchanged(host: str, action: ChangeAction, plan: Plan) -> dict[str, object]:
    """`--json` when the host already runs what was asked for: nothing ran."""
    return {"host": host, "action": action.value, "intent": plan.summary(), "outcome": "unchanged"}


def show_plan(plan: Plan) -> None:
    """The diff and the summary of a change about to run (secret values masked)."""
    _print_diff(plan)
    say(f"{plan.host}: {escape(plan.summary())}")
    if plan.release is not None:
        err.print(f"  SGLang {escape(plan.release)} (the unit's interpreter)", style="dim")
    for note in plan.notes:
        err.print(f"  [yellow]![/yellow] {escape(note)}", soft_wrap=True)


async def run_plan(
    session: HostSession,
    plan: Plan,
    args: argparse.Namespace,
    *,
    action: ChangeAction = ChangeAction.SET,
) -> int:
    """Diff, build check, confirm, then the change (also `specops rollback`'s way)."""
    profile = session.profile
    left = await _runs_otherwise(session, plan)
    if left is not None:
        # After a change that did not end the files are not what runs: the diff is the files'.
        err.print(
            f"  [yellow]![/yellow] {escape(profile.name)} {escape(left.text())}: the diff "
            "below starts from the unit files",
            soft_wrap=True,
        )
    show_plan(plan)
    if profile.service.check_flags:
        try:
            checked = await check_arguments(session, plan)
        except FlagError as exc:
            err.print(f"specops: {profile.name}: {exc}", markup=False)
            return EXIT_USAGE
        if checked:
            err.print(f"  [green]✓[/green] the build knows {escape(', '.join(checked))}")
    if (unwritable := await state_refused(session)) is not None:
        err.print(f"specops: {profile.name}: {unwritable}; nothing was changed", markup=False)
        return EXIT_FAILED
    if args.dry_run:
        if plan.dropin is None:
            out.print(f"dry run: would remove {plan.dropin_path}", style="dim", soft_wrap=True)
        else:
            out.print(f"dry run: would write {plan.dropin_path}:", style="dim", soft_wrap=True)
            out.print(plan.shown_dropin, markup=False, highlight=False, soft_wrap=True)
        soak_s = profile.service.soak_s if args.soak is None else args.soak
        out.print(
            f"then daemon-reload, restart {plan.unit}, wait up to "
            f"{profile.service.ready_timeout_s:.0f}s for health, smoke test, soak {soak_s:g}s. "
            "Nothing was changed.",
            style="dim",
            soft_wrap=True,
        )
        return EXIT_OK
    prompt = f"Apply to {profile.name} and restart {plan.unit}? [y/N] "
    if (refused := await confirm(args, prompt, "not applied")) is not None:
        return refused
    printer = ProgressPrinter()
    running = asyncio.ensure_future(
        change(
            session,
            plan,
            action=action,
            on_event=printer,
            rollback=not args.no_rollback,
            soak_s=args.soak,
        )
    )
    with _interrupt_twice(running, printer, profile.name):
        try:
            outcome = await running
        except asyncio.CancelledError:
            if not running.cancelled():
                raise
            err.print(
                f"specops: abandoned half way; check `specops status {profile.name}` and "
                f"`specops flags {profile.name}`"
            )
            return 130
        finally:
            printer.stop()
    report(outcome)
    if outcome.ok and outcome.result.outcome is RolloutOutcome.APPLIED:
        probation_note([profile.name], profile.service.probation_s, action)
    if getattr(args, "json", False):
        print(json.dumps(outcome.record(), default=str), flush=True)
    if outcome.result.unreachable:
        return EXIT_UNREACHABLE
    return EXIT_OK if outcome.ok else EXIT_FAILED


@contextlib.contextmanager
def _interrupt_twice(
    task: asyncio.Future[Any], printer: ProgressPrinter, host: str
) -> Iterator[None]:
    """Ctrl-C while a change runs asks first: stopping between steps leaves the host half way
    (e.g. a new drop-in but the old server), which is exactly what the rollout prevents."""
    loop = asyncio.get_running_loop()
    asked = [-INTERRUPT_CONFIRM_S]

    def interrupted() -> None:
        now = time.monotonic()
        if now - asked[0] <= INTERRUPT_CONFIRM_S:
            task.cancel()
            return
        asked[0] = now
        printer.stop()
        err.print(
            f"[yellow]a flag change is running on {host}[/yellow]: it ends healthy or rolled "
            f"back by itself; press Ctrl-C again within {INTERRUPT_CONFIRM_S:.0f}s to abandon "
            "it half way"
        )

    try:
        loop.add_signal_handler(signal.SIGINT, interrupted)
    except (NotImplementedError, RuntimeError, ValueError):  # not the main thread / no signals
        yield
        return
    try:
        yield
    finally:
        loop.remove_signal_handler(signal.SIGINT)
