"""`specops flags`, `specops set` and `specops audit`: read, change and account for flags.

`set` is the whole tuning step as one command: values are validated before any host is
touched (exit 2), the diff is shown, the build is asked whether it knows the arguments, and
after confirmation a `Rollout` applies the change and either ends healthy on it (exit 0) or
rolls back and says why, with the failing journal excerpt (exit 1). Progress goes to stderr
step by step; the outcome goes to stdout.
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
from datetime import UTC, datetime
from typing import Any

from rich.markup import escape
from rich.table import Table

from console import remote
from console.audit import AuditLog
from console.cli import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
    _load,
    err,
    new_session,
    out,
)
from console.events import RolloutEvent, RolloutFinished, RolloutOutcome, RolloutProgress
from console.flags import FlagError, effective_service, format_value, read_flags
from console.fleet import read_status
from console.plan import Plan, check_arguments, parse_assignments, read_plan
from console.profiles import FlagSpec, Profile, select
from console.rollout import Rollout, RolloutOptions
from console.ssh import ConnState, Disconnected, HostSession, RemoteError
from console.state import load_last_good

EXCERPT_SHOWN = 25
WAITING_EVERY_S = 15.0
INTERRUPT_CONFIRM_S = 5.0


def add_parsers(sub: Any, common: argparse.ArgumentParser) -> None:
    flags = sub.add_parser("flags", parents=[common], help="the service's flags, from its unit")
    flags.add_argument("host", metavar="HOST")
    flags.add_argument("--json", action="store_true", help="one JSON object")

    change = sub.add_parser(
        "set",
        parents=[common],
        help="change flags: restart, health check, smoke test, automatic rollback",
    )
    change.add_argument("host", metavar="HOST")
    change.add_argument("assignments", nargs="+", metavar="NAME=VALUE")
    change.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    change.add_argument("--dry-run", action="store_true", help="show the diff; change nothing")
    change.add_argument(
        "--no-rollback", action="store_true", help="leave a failing setting in place"
    )

    audit = sub.add_parser("audit", parents=[common], help="the remote commands run, newest last")
    audit.add_argument("hosts", nargs="*", metavar="HOST")
    audit.add_argument("-n", "--lines", type=int, default=None, help="only the last N")
    audit.add_argument("--json", action="store_true", help="one JSON object per command")


async def _connect(profile: Profile) -> HostSession | None:
    session = new_session(profile)
    session.start()
    state = await session.wait_settled(profile.ssh.connect_timeout_s + 5)
    if state.state is ConnState.CONNECTED:
        return session
    detail = f" ({state.fingerprint})" if state.fingerprint else f": {state.detail}"
    err.print(f"{profile.name}: {state.state.value}{detail}", markup=False)
    await session.close()
    return None


# --- flags -------------------------------------------------------------------------------


def _spec_record(spec: FlagSpec, value: Any, good: Any) -> dict[str, Any]:
    return {
        "value": value,
        "last_good": good,
        "type": spec.type,
        "arg": spec.arg,
        "env": spec.env,
        "inverted": spec.inverted,
        "min": spec.min,
        "max": spec.max,
        "choices": list(spec.choices) if spec.choices else None,
        "help": spec.help,
    }


async def cmd_flags(args: argparse.Namespace) -> int:
    (profile,) = select(_load(args), [args.host])
    session = await _connect(profile)
    if session is None:
        return EXIT_UNREACHABLE
    try:
        status = await read_status(session, with_flags=False)
        cat = await session.run(remote.systemctl_cat(profile.service.unit), timeout=30)
        service = effective_service(cat.stdout)
        values = read_flags(profile.flags, service.argv, service.environment)
    except Disconnected as exc:
        err.print(str(exc), markup=False)
        return EXIT_UNREACHABLE
    except (RemoteError, ValueError) as exc:
        err.print(f"{profile.name}: {exc}", markup=False)
        return EXIT_FAILED
    finally:
        await session.close()
    good = load_last_good(profile.name)
    good_values = dict(good.values) if good is not None else {}
    record: dict[str, Any] = {
        "host": profile.name,
        "unit": profile.service.unit,
        "active_state": status.active_state,
        "sub_state": status.sub_state,
        "invocation_id": status.invocation_id,
        "execstart": service.argv,
        "execstart_source": service.execstart_source,
        "flags": {
            name: _spec_record(spec, values.get(name), good_values.get(name))
            for name, spec in profile.flags.items()
        },
        "last_good": None
        if good is None
        else {
            "saved_at": _iso(good.saved_at),
            "invocation_id": good.invocation_id,
            "values": good_values,
        },
    }
    if args.json:
        print(json.dumps(record), flush=True)
        return EXIT_OK
    out.print(
        f"[b]{profile.name}[/b] · {profile.service.unit} · {status.active_state}/"
        f"{status.sub_state} · invocation {status.invocation_id[:12] or '-'}"
    )
    out.print(f"ExecStart from {escape(service.execstart_source or '?')}", style="dim")
    table = Table("flag", "value", "last good", "maps to", "type")
    table.add_column("help", ratio=1, min_width=12)
    for column in table.columns[:5]:
        column.no_wrap = True
        column.min_width = len(str(column.header))
    for name, spec in profile.flags.items():
        value = format_value(values.get(name))
        last = format_value(good_values[name]) if name in good_values else "-"
        if name in good_values and good_values[name] != values.get(name):
            last = f"[yellow]{escape(last)}[/yellow]"
        target = spec.arg or f"${spec.env}"
        if spec.inverted:
            target = f"no {target}"
        table.add_row(name, escape(value), last, escape(target), _type_text(spec), spec.help)
    out.print(table)
    if good is not None:
        out.print(f"last good configuration saved {_iso(good.saved_at)}", style="dim")
    return EXIT_OK


def _type_text(spec: FlagSpec) -> str:
    if spec.type == "choice" and spec.choices:
        return "|".join(spec.choices)
    if spec.min is not None or spec.max is not None:
        low = "" if spec.min is None else _number(spec.min)
        high = "" if spec.max is None else _number(spec.max)
        return f"{spec.type} {low}..{high}"
    return spec.type


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(value)


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="seconds")


# --- set ---------------------------------------------------------------------------------


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


def _say(text: str) -> None:
    out.print(text, soft_wrap=True)


def _report(result: RolloutFinished, plan: Plan) -> None:
    name = result.host
    if result.outcome is RolloutOutcome.APPLIED:
        accept = f", accept len {result.accept_len:.2f}" if result.accept_len is not None else ""
        _say(
            f"[green]{name}: applied[/green] {escape(plan.summary())}; healthy "
            f"(invocation {result.invocation_id[:12]}){accept}"
        )
        return
    if result.excerpt:
        err.print(f"journal of the failed invocation {result.failed_invocation or '?'}:")
        for line in result.excerpt[-EXCERPT_SHOWN:]:
            err.print(f"  {line}", markup=False, highlight=False, soft_wrap=True)
    values = " ".join(f"{k}={format_value(v)}" for k, v in result.flags.items())
    if result.outcome is RolloutOutcome.ROLLED_BACK:
        _say(
            f"[yellow]{name}: rolled back[/yellow]: {escape(result.reason)}\n"
            f"{name}: back on {escape(values)}; healthy (invocation {result.invocation_id[:12]})"
        )
        return
    _say(f"[red]{name}: FAILED[/red]: {escape(result.reason)}")
    if result.rollback_error:
        _say(f"{name}: {escape(result.rollback_error)}")
    good = load_last_good(name)
    if good is not None and result.failed_invocation and dict(good.values) != result.flags:
        restore = " ".join(f"{k}={format_value(v)}" for k, v in good.values.items())
        _say(f"last good ({_iso(good.saved_at)}): specops set {name} {escape(restore)}")


async def cmd_set(args: argparse.Namespace) -> int:
    (profile,) = select(_load(args), [args.host])
    if args.read_only and not args.dry_run:
        err.print(f"specops: refusing to change {profile.name}: --read-only (try --dry-run)")
        return EXIT_USAGE
    try:
        changes = parse_assignments(profile, args.assignments)
    except FlagError as exc:
        err.print(f"specops: {profile.name}: {exc}", markup=False)
        return EXIT_USAGE
    session = await _connect(profile)
    if session is None:
        return EXIT_UNREACHABLE
    try:
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
        _say(f"{profile.name}: nothing to change ({escape(plan.summary())})")
        return EXIT_OK
    _print_diff(plan)
    _say(f"{profile.name}: {escape(plan.summary())}")
    if profile.service.check_flags:
        try:
            checked = await check_arguments(session, plan)
        except FlagError as exc:
            err.print(f"specops: {profile.name}: {exc}", markup=False)
            return EXIT_USAGE
        if checked:
            err.print(f"  [green]✓[/green] the build knows {escape(', '.join(checked))}")
    if args.dry_run:
        out.print(f"dry run: would write {plan.dropin_path}:", style="dim", soft_wrap=True)
        out.print(plan.dropin, markup=False, highlight=False, soft_wrap=True)
        out.print(
            f"then daemon-reload, restart {plan.unit}, wait up to "
            f"{profile.service.ready_timeout_s:.0f}s for health, smoke test. Nothing was changed.",
            style="dim",
            soft_wrap=True,
        )
        return EXIT_OK
    if not args.yes:
        if not sys.stdin.isatty():
            err.print("refusing to restart without a terminal to ask on; pass --yes to confirm")
            return EXIT_USAGE
        prompt = f"Apply to {profile.name} and restart {plan.unit}? [y/N] "
        answer = (await asyncio.to_thread(input, prompt)).strip().lower()
        if answer not in ("y", "yes"):
            err.print("not applied")
            return EXIT_FAILED
    printer = ProgressPrinter()
    options = RolloutOptions(rollback=not args.no_rollback)
    rollout = asyncio.ensure_future(Rollout(session, plan, on_event=printer, options=options).run())
    with _interrupt_twice(rollout, printer, profile.name):
        try:
            result = await rollout
        except asyncio.CancelledError:
            if not rollout.cancelled():
                raise
            err.print(
                f"specops: abandoned half way; check `specops status {profile.name}` and "
                f"`specops flags {profile.name}`"
            )
            return 130
        finally:
            printer.stop()
    _report(result, plan)
    return EXIT_OK if result.ok else EXIT_FAILED


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


# --- audit -------------------------------------------------------------------------------


def cmd_audit(args: argparse.Namespace) -> int:
    records = [r for r in AuditLog().read() if not args.hosts or r.host in args.hosts]
    if args.lines is not None:
        records = records[-args.lines :] if args.lines > 0 else []
    for r in records:
        if args.json:
            print(r.to_json(), flush=True)
            continue
        status = "no exit" if r.exit is None else f"exit {r.exit}"  # stopped, or link lost
        style = "red" if r.exit != 0 else ""
        out.print(
            f"{r.time}  {r.host}  [{style or 'default'}]{status:>7}[/]  {r.duration_s:7.3f}s  "
            f"{escape(r.command)}",
            highlight=False,
            soft_wrap=True,
        )
    return EXIT_OK


def run(args: argparse.Namespace) -> int:
    if args.command == "flags":
        return asyncio.run(cmd_flags(args))
    if args.command == "set":
        return asyncio.run(cmd_set(args))
    return cmd_audit(args)


COMMANDS = ("flags", "set", "audit")
