"""`specops watch HOST... [--json]`: headless monitoring, and the probation rollback.

Follows the hosts through the fleet's monitor (the same journal followers as the TUI) and
prints crash alerts, restarts and each host's probation state. A crash or restart of a host on
probation (console/tuning/probation.py) is announced with a countdown; when it runs out the
host goes back to its last good configuration through the one path of every change
(console/tuning/change.py: restart, health, smoke, soak; its history entry, audit action and
ledger record, named `probation-rollback`), started by the guard itself as in the TUI.

Ctrl-C during a countdown cancels the rollbacks counting down: the host is left alone (the
crash is noted in its history) and watching goes on. Ctrl-C at any other time (or SIGTERM)
ends the watch with exit 0. Exit 1 when a probation rollback failed during the watch, 3 when
no host could be reached at the start, 2 for bad usage. Read-only (`--read-only`, settings,
SPECOPS_READ_ONLY) means alerts only: nothing on a host is changed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import signal
import sys
import time
from typing import Any

from rich.markup import escape

from console.cli import set as set_
from console.cli.common import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_UNREACHABLE,
    err,
    human_to_stderr,
    load_profiles,
    out,
    read_only_reason,
)
from console.cli.outcome import report
from console.fleet.fleet import Fleet
from console.hosts.events import CrashDetected, HostStateChanged, InvocationChanged
from console.hosts.profiles import select
from console.local.audit import AuditLog
from console.local.settings import load_settings
from console.transport.ssh import ConnState
from console.tuning.probation import (
    Probation,
    ProbationAnnounced,
    ProbationCancelled,
    ProbationDone,
    ProbationEvent,
    ProbationGuard,
    ProbationRolling,
    ProbationState,
    ProbationTick,
)

STATE_CHECK_S = 30.0
"""How often the probation windows are looked at (to say when one ended) and each host's
history read again (a change another console kept)."""


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    cmd = sub.add_parser(
        "watch",
        parents=[common],
        help="follow hosts: crash alerts, restarts, probation rollbacks",
        description="Follow HOST...: crash alerts, restarts and probation. A crash during "
        "probation is rolled back after a countdown; Ctrl-C during the countdown cancels it "
        "(the host is left alone, watching goes on); Ctrl-C otherwise exits 0.",
    )
    cmd.add_argument("hosts", nargs="+", metavar="HOST")
    cmd.add_argument("--json", action="store_true", help="one JSON object per event")
    cmd.add_argument(
        "--countdown",
        type=set_.soak_seconds,
        metavar="S",
        help="seconds a probation rollback is announced first "
        "(default: the profile's service.rollback_countdown_s)",
    )


def run(args: argparse.Namespace) -> int:
    profiles = select(load_profiles(args), args.hosts)
    return asyncio.run(Watch(profiles, args).run())


class Watch:
    def __init__(self, profiles: list[Any], args: argparse.Namespace) -> None:
        self.args = args
        self.as_json: bool = args.json
        secrets = frozenset().union(*(p.secret_names for p in profiles))
        audit = AuditLog(secrets=secrets)
        self.fleet = Fleet(
            profiles,
            on_command=audit.record,
            health_s=0,
            history=50,
            connect_budget=load_settings().connect_budget,
        )
        self.read_only = read_only_reason(args)
        self.printer = set_.ProgressPrinter()
        self.guard = ProbationGuard(
            self.fleet.sessions,
            self._probation_event,
            on_rollout=self.printer,
            source="cli",
            read_only=None if self.read_only is None else f"read-only ({self.read_only})",
            countdown_s=args.countdown,
            clock=self.fleet.clock,
        )
        self.stopped = asyncio.Event()
        self._asked_at = -set_.INTERRUPT_CONFIRM_S
        self._shown: dict[str, str | None] = {}
        self._tasks: list[asyncio.Task[None]] = []

    # --- output ------------------------------------------------------------------------

    def emit(self, kind: str, host: str, text: str, **fields: Any) -> None:
        if self.as_json:
            record = {"event": kind, "host": host, "time": time.time(), **fields}
            print(json.dumps(record, default=str), flush=True)
        else:
            out.print(text, soft_wrap=True)

    def _fleet_event(self, event: object) -> None:
        self.guard.observe(event)
        if isinstance(event, HostStateChanged):
            state = event.state
            self.emit(
                "connection",
                state.host,
                f"{escape(state.host)}: {state.state.value}"
                + (f" ({escape(state.detail)})" if state.detail else ""),
                state=state.state.value,
                detail=state.detail,
            )
        elif isinstance(event, CrashDetected) and event.live:
            probation = self.guard.state(event.host)
            where = "" if probation is None else " (on probation)"
            self.emit(
                "crash",
                event.host,
                f"[red]{escape(event.host)}: CRASH {event.signature}[/red]{where}: "
                f"{escape(event.line)}",
                signature=event.signature,
                line=event.line,
                invocation=event.invocation,
                flags=event.flags,
                probation=probation is not None,
            )
        elif isinstance(event, InvocationChanged) and self._live(event.host):
            self.emit(
                "restart",
                event.host,
                f"[yellow]{escape(event.host)}: restarted[/yellow] "
                f"(new invocation {event.invocation[:12]})",
                invocation=event.invocation,
                previous=event.previous,
            )

    def _say_probation(self, host: str, probation: Probation | None) -> None:
        key = None if probation is None else f"{probation.entry.n}"
        if host in self._shown and self._shown[host] == key:
            return
        was_on = self._shown.get(host) is not None
        self._shown[host] = key
        if probation is None:
            text = (
                "no longer on probation (window over, a newer change, or a rollback): "
                "crashes are alerts"
                if was_on
                else "not on probation"
            )
            self.emit("probation", host, f"{host}: {text}", on=False)
            return
        now = time.time()
        values = " ".join(f"{k}={v}" for k, v in probation.entry.values.items())
        self.emit(
            "probation",
            host,
            f"[cyan]{host}: {probation.label(now)}[/cyan] (history entry {probation.entry.n}: "
            f"{escape(values)}; a crash or restart rolls it back)",
            on=True,
            entry=probation.entry.n,
            left_s=round(probation.left_s(now)),
            until=probation.until,
        )

    def _live(self, host: str) -> bool:
        """False while the host's follower replays the journal from before the watch."""
        follower = self.fleet.followers.get(host)
        return follower is None or not follower.replaying

    def _probation_event(self, event: ProbationEvent) -> None:
        host = event.host
        if isinstance(event, ProbationState):
            self._say_probation(host, event.probation)
        elif isinstance(event, ProbationAnnounced):
            crash = event.crash
            what = crash.signature or "restart"
            head = (
                f"[bold red]{host}: {what} {crash.since_kept_s:.0f}s after {crash.kept_change} "
                f"(probation, history entry {crash.entry})[/bold red]: {escape(crash.line)}"
            )
            if event.reason is not None:
                text = f"{head}\n{host}: {escape(event.reason)}; back to {event.target}: " + (
                    f"specops rollback {host}"
                )
            else:
                text = (
                    f"{head}\n{host}: rolling back to {escape(event.target)} in "
                    f"{event.countdown_s:g}s — Ctrl-C cancels (the host is then left alone)"
                )
            self.emit(
                "probation_crash",
                host,
                text,
                entry=crash.entry,
                signature=crash.signature,
                line=crash.line,
                since_kept_s=round(crash.since_kept_s, 1),
                target=event.target,
                countdown_s=event.countdown_s,
                rollback=event.reason is None,
                reason=event.reason,
            )
        elif isinstance(event, ProbationTick):
            if not self.as_json and sys.stderr.isatty():
                err.print(f"  … rolling back {host} in {event.left_s:.0f}s (Ctrl-C cancels)")
        elif isinstance(event, ProbationCancelled):
            self.emit(
                "probation_cancelled",
                host,
                f"[yellow]{escape(event.detail)}[/yellow] (still watching; Ctrl-C again exits)",
            )
        elif isinstance(event, ProbationRolling):
            with human_to_stderr(self.as_json):
                set_.show_plan(event.plan)
        elif isinstance(event, ProbationDone):
            self.printer.stop()
            if event.outcome is not None:
                with human_to_stderr(self.as_json):
                    report(event.outcome)
            style = "green" if event.ok else "red"
            self.emit(
                "probation_rollback",
                host,
                f"[{style}]{host}: probation rollback: {escape(event.detail)}[/{style}]",
                ok=event.ok,
                skipped=event.skipped,
                detail=event.detail,
            )

    # --- running -----------------------------------------------------------------------

    def _interrupted(self) -> None:
        cancelled = self.guard.cancel()
        if cancelled:
            return
        rolling = self.guard.rolling
        now = time.monotonic()
        if rolling and now - self._asked_at > set_.INTERRUPT_CONFIRM_S:
            # Stopping between steps leaves the host half way: ask first, as `set` does.
            self._asked_at = now
            self.printer.stop()
            err.print(
                f"[yellow]a probation rollback is running on {', '.join(sorted(rolling))}"
                f"[/yellow]: it ends healthy or failed by itself; press Ctrl-C again within "
                f"{set_.INTERRUPT_CONFIRM_S:.0f}s to abandon it half way and stop watching"
            )
            return
        self.stopped.set()

    def _catch_interrupts(self) -> None:
        """Ctrl-C cancels a countdown, else ends the watch; SIGTERM ends it."""
        loop = asyncio.get_running_loop()
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(signal.SIGINT, self._interrupted)
            loop.add_signal_handler(signal.SIGTERM, self.stopped.set)

    async def _check_windows(self) -> None:
        while True:
            await asyncio.sleep(STATE_CHECK_S)
            for host in self.fleet.profiles:
                if self._shown.get(host) is not None and self.guard.state(host) is None:
                    self._say_probation(host, None)
                self.guard.reread(host)  # a change kept by another console meanwhile

    async def run(self) -> int:
        self._catch_interrupts()
        if self.read_only is not None:
            err.print(f"read-only ({self.read_only}): alerts only, no rollback", markup=False)
        self.fleet.listen(self._fleet_event)
        self.fleet.start()
        try:
            settled = await asyncio.gather(
                *(
                    s.wait_settled(s.profile.ssh.connect_timeout_s + 5)
                    for s in self.fleet.sessions.values()
                )
            )
            if not any(state.state is ConnState.CONNECTED for state in settled):
                return EXIT_UNREACHABLE
            self._tasks.append(asyncio.create_task(self._check_windows()))
            await self.stopped.wait()
        finally:
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGINT, signal.SIGTERM):
                with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                    loop.remove_signal_handler(sig)
            await self.guard.stop()
            for task in self._tasks:
                task.cancel()
            await self.fleet.stop()
        return EXIT_FAILED if self.guard.rollbacks_failed else EXIT_OK
