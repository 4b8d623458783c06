"""Apply a flag change so that it ends healthy on the new setting or back on the old one.

The hand-run routine this replaces (sed the unit, daemon-reload, restart, curl, squint at the
journal) fails in quiet ways: `systemctl restart` returns 0 for a server that dies a minute
later in CUDA graph capture, an edited unit is half-written, nobody remembers the old line.
A `Rollout` runs DESIGN §5 step by step and reports each step as a `RolloutProgress`:

record InvocationID, NRestarts, the current drop-in and a journal cursor → write the drop-in
to a temp name and rename it → daemon-reload → check NeedDaemonReload=no → restart → wait for
a new InvocationID → watch that invocation's journal for crash signatures while polling
`/health` through the SSH connection → smoke completion → wait for the first decode line →
soak for `service.soak_s` (console/tuning/soak.py) → remember the configuration as the host's
last good one (only a soaked change becomes one).

Any failure (a crash signature, the unit failed, systemd restarting it, no health before
`ready_timeout_s`, a wrong smoke answer) keeps the failing journal excerpt and rolls back:
restore the previous drop-in (or remove ours), daemon-reload, reset-failed, restart, and wait
for health again.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import posixpath
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from console.events import (
    RolloutEvent,
    RolloutFinished,
    RolloutJournal,
    RolloutOutcome,
    RolloutProgress,
    RolloutStep,
)
from console.service.flags import read_flags
from console.service.unit import ServiceExec, effective_service, without_file
from console.state import LastGood, save_last_good
from console.transport import http, remote
from console.transport.ssh import Disconnected, HostSession, RemoteError, Result
from console.tuning.history import HistoryError, Recorder, abandoned_note
from console.tuning.invocation import InvocationWatch
from console.tuning.plan import Plan
from console.tuning.smoke import smoke_completion
from console.tuning.soak import soak, stage_of
from console.watch.journal import decode_entry
from console.watch.signatures import CRASH_SIGNATURES, crash_signature

Listener = Callable[[RolloutEvent], None]
_RANK = {name: i for i, (name, _) in enumerate(CRASH_SIGNATURES)}


@dataclass(frozen=True)
class RolloutOptions:
    rollback: bool = True
    """Put the previous configuration back when the new one fails (`--no-rollback`: False)."""
    poll_s: float = 2.0
    """How often `systemctl show` and `/health` are polled while the server starts."""
    ready_timeout_s: float | None = None
    """Overrides the profile's `service.ready_timeout_s`."""
    settle_s: float = 15.0
    """After the smoke test, how long to wait for the first decode line (its accept length)."""
    soak_s: float | None = None
    """Overrides the profile's `service.soak_s` (`specops set --soak S`)."""
    invocation_timeout_s: float = 90.0
    reconnect_s: float = 30.0
    """How long a dropped SSH link may take to come back before the rollout gives up."""
    excerpt_lines: int = 80
    kind: str = "change"
    """What the host's history calls this rollout: "change" or "rollback" (`specops rollback`)."""


CRASH_LINE_WAIT_S = 3.0
"""After systemd says the server died, how long its crash lines may take to arrive."""


async def _crash_line(watch: InvocationWatch, timeout: float) -> None:
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(timeout):
            while watch.signature is None:
                watch.changed.clear()
                await watch.changed.wait()


class _Failure(Exception):
    def __init__(
        self, reason: str, *, signature: str | None = None, phase: str | None = None
    ) -> None:
        super().__init__(reason)
        self.reason = reason
        self.signature = signature
        self.phase = phase


class Rollout:
    """One change on one host. `await run()` returns how it ended; it never raises for a
    remote failure (those end as FAILED or ROLLED_BACK with the reason)."""

    def __init__(
        self,
        session: HostSession,
        plan: Plan,
        *,
        on_event: Listener | None = None,
        options: RolloutOptions = RolloutOptions(),
    ) -> None:
        self.session = session
        self.plan = plan
        self.profile = session.profile
        self.unit = plan.unit
        self.options = options
        self._on_event = on_event
        self._t0 = time.monotonic()
        self._touched = False
        self._restarted = False
        self._watch: InvocationWatch | None = None
        self._rollback = False
        self._current = RolloutStep.RECORD
        self._restarts = 0
        self._ready = False
        self._history = Recorder(session, plan, options.kind)
        self._abandoned: tuple[str, ...] = ()
        self._failed_restarts: int | None = None
        self._cat = ""
        self._expect: ServiceExec | None = None
        """In a rollback: the effective unit the restored drop-in must give."""

    @property
    def soak_s(self) -> float:
        if self.options.soak_s is not None:
            return self.options.soak_s
        return self.profile.service.soak_s

    @property
    def ready_timeout_s(self) -> float:
        return self.options.ready_timeout_s or self.profile.service.ready_timeout_s

    # --- reporting ---------------------------------------------------------------------

    def _emit(self, event: RolloutEvent) -> None:
        if self._on_event is not None:
            self._on_event(event)

    def _step(self, step: RolloutStep, state: str, detail: str = "") -> None:
        elapsed = time.monotonic() - self._t0
        if state == "running":
            self._current = step
        self._emit(RolloutProgress(self.plan.host, step, state, detail, elapsed, self._rollback))

    def _lines(self, invocation: str, lines: list[str]) -> None:
        self._emit(RolloutJournal(self.plan.host, invocation, tuple(lines)))

    # --- remote helpers ----------------------------------------------------------------

    async def _read(self, command: remote.Command, timeout: float = 30.0) -> Result:
        """A read-only command, retried once after a reconnect."""
        try:
            return await self.session.run(command, timeout=timeout)
        except Disconnected:
            if not await self.session.wait_connected(self.options.reconnect_s):
                raise
            return await self.session.run(command, timeout=timeout)

    async def _show(self) -> dict[str, str]:
        result = await self._read(remote.systemctl_show(self.unit))
        return remote.parse_show(result.stdout)

    async def _health(self) -> tuple[bool, str]:
        try:
            response = await http.request(
                self.session, self.profile.service.port, "GET", self.profile.service.health_path
            )
        except http.PortClosed:
            return False, "port closed"
        except http.HttpError as exc:
            return False, str(exc)
        except Disconnected:
            if not await self.session.wait_connected(self.options.reconnect_s):
                raise
            return False, "reconnected"
        return response.status == 200, f"/health {response.status}"

    # --- the sequence ------------------------------------------------------------------

    async def run(self) -> RolloutFinished:
        self._t0 = time.monotonic()
        try:
            result = await self._run()
        finally:
            if self._watch is not None:
                await self._watch.stop()
        result = await self._record_outcome(result)
        self._emit(result)
        return result

    async def _record_outcome(self, result: RolloutFinished) -> RolloutFinished:
        """Rewrite this rollout's history entry on the host with how it ended."""
        fields: dict[str, Any] = {"abandoned": self._abandoned}
        self._rollback = False  # the record is the rollout's, not the rollback's
        if self._history.entry is not None:
            self._step(RolloutStep.HISTORY, "running")
            try:
                entry = await self._history.end(result, self._failed_restarts)
            except (HistoryError, RemoteError) as exc:
                self._step(RolloutStep.HISTORY, "failed", f"the outcome is not recorded: {exc}")
            else:
                fields["history_entry"] = entry.n
                where = self._history.path
                self._step(RolloutStep.HISTORY, "ok", f"entry {entry.n} {entry.outcome}: {where}")
        return dataclasses.replace(result, **fields)

    async def _run(self) -> RolloutFinished:
        try:
            old_invocation, previous, cursor = await self._record()
        except (_Failure, RemoteError) as exc:
            self._step(RolloutStep.RECORD, "failed", str(exc))
            return self._finished(RolloutOutcome.FAILED, f"{exc}; nothing was changed")
        self._watch = InvocationWatch(self.session, self.unit, cursor, self._lines)
        self._watch.start()
        try:
            await self._install(self.plan.dropin)
            invocation = await self._restart_and_wait(old_invocation)
            await self._smoke()
            accept_len = await self._settle(invocation)
            await self._soak(invocation)
        except (_Failure, RemoteError) as exc:
            failure = exc if isinstance(exc, _Failure) else _Failure(str(exc))
            return await self._fail(failure, previous)
        self._remember(invocation)
        return self._finished(
            RolloutOutcome.APPLIED,
            invocation_id=invocation,
            flags=dict(self.plan.new_values),
            accept_len=accept_len,
            soaked_s=self.soak_s,
        )

    async def _record(self) -> tuple[str, str | None, str | None]:
        self._step(RolloutStep.RECORD, "running")
        props = await self._show()
        cat = await self._read(remote.systemctl_cat(self.unit))
        if effective_service(cat.stdout) != self.plan.service:
            raise _Failure("the unit changed since the diff was made; review the change again")
        previous: str | None = None
        if self.plan.dropin_path in self.plan.service.files:
            previous = (await self._read(remote.read_file(self.plan.dropin_path))).stdout
        last = await self._read(remote.journal_last(self.unit))
        entries = [e for line in last.stdout.splitlines() if (e := decode_entry("", line))]
        cursor = entries[-1].cursor if entries else None
        healthy, _ = await self._health()
        invocation = props.get("InvocationID", "")
        self._cat = cat.stdout
        await self._begin_history(cat.stdout)
        self._step(
            RolloutStep.RECORD,
            "ok",
            f"invocation {invocation[:12] or '-'}, NRestarts {props.get('NRestarts', '?')}, "
            f"{'previous specops drop-in kept' if previous is not None else 'no specops drop-in'}"
            f", {'healthy' if healthy else 'not healthy'} before the change",
        )
        return invocation, previous, cursor

    async def _begin_history(self, cat_text: str) -> None:
        """Record the change on the host before anything changes; report abandoned ones."""
        try:
            abandoned = await self._history.begin(cat_text)
        except HistoryError as exc:
            raise _Failure(str(exc)) from None
        self._abandoned = tuple(abandoned_note(e) for e in abandoned)
        for note in self._abandoned:
            self._step(RolloutStep.HISTORY, "failed", note)
        entry = self._history.entry
        assert entry is not None
        self._step(RolloutStep.HISTORY, "ok", f"entry {entry.n} started: {self._history.path}")

    async def _install(self, text: str | None) -> None:
        """Write (or with None remove) our drop-in atomically, daemon-reload, verify."""
        path = self.plan.dropin_path
        step = RolloutStep.RESTORE if self._rollback else RolloutStep.WRITE
        self._step(step, "running", path)
        if text is None:
            self._touched = True
            await self.session.run(remote.remove(path))
            self._step(step, "ok", f"removed {path}")
        else:
            directory = posixpath.dirname(path)
            tmp = posixpath.join(directory, f".{posixpath.basename(path)}.tmp")
            await self.session.run(remote.make_dirs(directory))
            try:
                await self.session.run(remote.write_file(tmp, text))
                self._touched = True
                await self.session.run(remote.move(tmp, path))
            except RemoteError:
                with contextlib.suppress(RemoteError):
                    await self.session.run(remote.remove(tmp))
                raise
            self._step(step, "ok", f"{path} ({len(text.encode())} bytes, via rename)")
        self._step(RolloutStep.DAEMON_RELOAD, "running")
        await self.session.run(remote.systemctl_daemon_reload(), timeout=120)
        self._step(RolloutStep.DAEMON_RELOAD, "ok")
        props = await self._show()
        if props.get("NeedDaemonReload") != "no":
            raise _Failure(f"NeedDaemonReload={props.get('NeedDaemonReload')} after daemon-reload")
        await self._verify_effective()
        self._step(
            RolloutStep.VERIFY, "ok", "NeedDaemonReload=no; the effective unit is as planned"
        )

    async def _verify_effective(self) -> None:
        """The unit systemd now has must run what we meant: a drop-in sorting after ours (or
        an edit racing us) would otherwise be restarted and pass for the new setting."""
        cat = await self._read(remote.systemctl_cat(self.unit))
        effective = effective_service(cat.stdout)
        if len(effective.commands) != 1:
            raise _Failure(f"after daemon-reload the unit has {len(effective.commands)} ExecStart=")
        if self._rollback:
            target = self._expect or self.plan.service
            argv, env = target.argv, target.environment
        else:
            argv, env = list(self.plan.new_argv), self.plan.new_environment
        managed = {s.env for s in self.profile.flags.values() if s.env is not None}
        now_env = {k: v for k, v in effective.environment.items() if k in managed}
        if effective.argv != argv or now_env != {k: v for k, v in env.items() if k in managed}:
            raise _Failure(
                f"after daemon-reload the effective ExecStart/Environment is not the planned one "
                f"(ExecStart= from {effective.execstart_source}; a drop-in sorting after "
                f"{posixpath.basename(self.plan.dropin_path)} overrides it?)"
            )

    async def _restart_and_wait(self, old_invocation: str) -> str:
        assert self._watch is not None
        self._step(RolloutStep.RESTART, "running")
        self._restarted = True
        await self.session.run(remote.systemctl_restart(self.unit), timeout=self.ready_timeout_s)
        self._step(RolloutStep.RESTART, "ok")
        started = time.monotonic()
        self._step(RolloutStep.INVOCATION, "running")
        while True:
            props = await self._show()
            invocation = props.get("InvocationID", "")
            if invocation and invocation != old_invocation:
                break
            if props.get("ActiveState") == "failed":
                raise _Failure(f"the unit failed to start (Result={props.get('Result')})")
            if time.monotonic() - started > self.options.invocation_timeout_s:
                raise _Failure("systemd started no new invocation after the restart")
            await asyncio.sleep(min(self.options.poll_s, 0.5))
        restarts = int(props.get("NRestarts") or 0)
        self._restarts = restarts
        self._ready = False
        self._watch.focus(invocation)
        self._step(RolloutStep.INVOCATION, "ok", invocation)
        await self._wait_ready(invocation, restarts, started)
        return invocation

    def _check_crash(self) -> None:
        watch = self._watch
        if watch is not None and watch.signature is not None:
            raise _Failure(
                f"crash: {watch.signature} during {watch.crash_phase}: {watch.crash_line}",
                signature=watch.signature,
                phase=watch.crash_phase,
            )

    async def _wait_ready(self, invocation: str, restarts: int, started: float) -> None:
        """Poll systemd and /health every `poll_s` (at once when the start-up phase moves on,
        e.g. at "ready to roll"); check the journal for a crash on every line."""
        watch = self._watch
        assert watch is not None
        timeout = self.ready_timeout_s
        self._step(RolloutStep.READY, "running", f"up to {timeout:.0f}s")
        polled_phase: str | None = None
        next_poll = 0.0
        while True:
            self._check_crash()
            if time.monotonic() >= next_poll or watch.phase != polled_phase:
                polled_phase = watch.phase
                next_poll = time.monotonic() + self.options.poll_s
                if await self._ready_now(invocation, restarts, started):
                    return
            watch.changed.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(max(0.0, next_poll - time.monotonic())):
                    await watch.changed.wait()

    async def _ready_now(self, invocation: str, restarts: int, started: float) -> bool:
        watch = self._watch
        assert watch is not None
        props = await self._show()
        now_restarts = int(props.get("NRestarts") or 0)
        if props.get("ActiveState") == "failed":
            raise _Failure(f"the unit failed (Result={props.get('Result')})", phase=watch.phase)
        if now_restarts > restarts or props.get("InvocationID") not in ("", invocation):
            raise _Failure(
                f"systemd restarted the server (NRestarts {restarts} → {now_restarts})",
                phase=watch.phase,
            )
        healthy, detail = await self._health()
        self._check_crash()
        elapsed = time.monotonic() - started
        timeout = self.ready_timeout_s
        if healthy:
            self._ready = True
            self._step(RolloutStep.READY, "ok", f"healthy after {elapsed:.0f}s")
            return True
        if elapsed > timeout:
            raise _Failure(
                f"not healthy within ready_timeout_s={timeout:.0f}s ({detail})", phase=watch.phase
            )
        progress = f"{elapsed:.0f}s/{timeout:.0f}s {watch.phase}; {detail}"
        self._step(RolloutStep.READY, "waiting", progress)
        return False

    async def _smoke(self) -> None:
        smoke = self.profile.service.smoke
        self._step(RolloutStep.SMOKE, "running", f"{smoke.prompt!r} must contain {smoke.expect!r}")
        try:
            answer = await smoke_completion(self.session)
        except http.HttpError as exc:
            raise _Failure(f"smoke test: {exc}", phase="serving") from None
        self._check_crash()
        if smoke.expect not in answer:
            raise _Failure(
                f"smoke test: {smoke.prompt!r} answered {answer!r}, expected {smoke.expect!r}",
                phase="serving",
            )
        self._step(RolloutStep.SMOKE, "ok", f"answered {answer.strip()!r}")

    async def _settle(self, invocation: str) -> float | None:
        """Keep watching until the first decode line (its accept length) or `settle_s`."""
        watch = self._watch
        assert watch is not None
        self._step(RolloutStep.SETTLE, "running")
        deadline = time.monotonic() + self.options.settle_s
        while watch.accept_len is None and time.monotonic() < deadline:
            self._check_crash()
            watch.changed.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(deadline - time.monotonic()):
                    await watch.changed.wait()
        self._check_crash()
        props = await self._show()
        if props.get("InvocationID") != invocation or props.get("ActiveState") != "active":
            raise _Failure(
                f"the server stopped after the smoke test ({props.get('ActiveState')})",
                phase=watch.phase,
            )
        if watch.accept_len is None:
            self._step(
                RolloutStep.SETTLE, "skipped", f"no decode line within {self.options.settle_s:.0f}s"
            )
        else:
            self._step(RolloutStep.SETTLE, "ok", f"accept len {watch.accept_len:.2f}")
        return watch.accept_len

    async def _soak(self, invocation: str) -> None:
        """Keep watching the new invocation for `soak_s`; then /health must still be 200."""
        watch = self._watch
        assert watch is not None
        seconds = self.soak_s
        if seconds <= 0:
            self._step(RolloutStep.SOAK, "skipped", "soak_s = 0")
            return
        self._step(RolloutStep.SOAK, "running", f"{seconds:g}s")

        async def check() -> None:
            self._check_crash()
            props = await self._show()
            restarts = int(props.get("NRestarts") or 0)
            if props.get("InvocationID") != invocation or restarts > self._restarts:
                raise _Failure(
                    f"systemd restarted the server during the soak (NRestarts "
                    f"{self._restarts} → {restarts})",
                    phase=watch.phase,
                )
            if props.get("ActiveState") != "active":
                raise _Failure(
                    f"the server stopped during the soak ({props.get('ActiveState')}, "
                    f"Result={props.get('Result')})",
                    phase=watch.phase,
                )

        def report(countdown: str) -> None:
            self._step(RolloutStep.SOAK, "waiting", countdown)

        await soak(watch, seconds, poll_s=self.options.poll_s, check=check, report=report)
        healthy, detail = await self._health()
        self._check_crash()
        if not healthy:
            raise _Failure(f"not healthy at the end of the soak ({detail})", phase=watch.phase)
        accept = watch.last_accept_len
        tail = f", accept len {accept:.2f}" if accept is not None else ""
        self._step(RolloutStep.SOAK, "ok", f"{seconds:g}s on invocation {invocation[:12]}{tail}")

    def _remember(self, invocation: str) -> None:
        record = LastGood(
            host=self.plan.host,
            unit=self.unit,
            values=dict(self.plan.new_values),
            argv=list(self.plan.new_argv),
            environment=dict(self.plan.new_environment),
            dropin=self.plan.dropin,
            invocation_id=invocation,
        )
        try:
            path = save_last_good(record)
        except OSError as exc:
            self._step(RolloutStep.REMEMBER, "failed", f"cannot save the last good state: {exc}")
            return
        self._step(RolloutStep.REMEMBER, "ok", str(path))

    # --- failure and rollback ----------------------------------------------------------

    async def _fail(self, failure: _Failure, previous: str | None) -> RolloutFinished:
        watch = self._watch
        failed = watch.target if watch is not None else None
        self._step(self._current, "failed", failure.reason)
        if watch is not None and self._restarted and failure.signature is None:
            # systemd may report the dead server before its last lines reach the journal
            # follower: wait briefly for them, so the crash is named and timed.
            await _crash_line(watch, CRASH_LINE_WAIT_S)
            if watch.signature is not None:
                failure = _Failure(
                    f"{failure.reason}; crash: {watch.signature} during {watch.crash_phase}: "
                    f"{watch.crash_line}",
                    signature=watch.signature,
                    phase=watch.crash_phase,
                )
        excerpt = await self._excerpt(failed)
        signature = failure.signature
        for line in excerpt:  # the whole traceback may name the crash more precisely
            found = crash_signature(line)
            if found is not None and (signature is None or _RANK[found] < _RANK[signature]):
                signature = found
        ready = self._ready or (watch is not None and watch.ready_at is not None)
        stage = stage_of(failure.phase, ready) if self._restarted else None
        ready_to_crash = watch.ready_to_crash_s if watch is not None and ready else None
        reason = failure.reason
        exception_line = watch.exception_line if watch is not None else None
        if signature is None and exception_line is not None:  # any exception that ended it
            reason = f"{reason}; last exception: {exception_line}"
        if stage is not None:
            after = f", {ready_to_crash:.1f}s after ready" if ready_to_crash is not None else ""
            reason = f"{reason} [{stage}{after}]"
        report: dict[str, Any] = {
            "reason": reason,
            "signature": signature,
            "phase": failure.phase,
            "excerpt": excerpt,
            "failed_invocation": failed,
            "stage": stage,
            "ready_to_crash_s": ready_to_crash,
            "exception_line": exception_line,
        }
        if not self._touched:
            return self._finished(
                RolloutOutcome.FAILED, **{**report, "reason": f"{reason}; nothing changed"}
            )
        if not self.options.rollback:
            return self._finished(
                RolloutOutcome.FAILED,
                **report,
                flags=dict(self.plan.new_values),
                rollback_error="not rolled back (--no-rollback): the new setting is in place",
            )
        self._rollback = True
        text, label, values = self._rollback_target(previous)
        try:
            if not await self.session.wait_connected(self.options.reconnect_s):
                raise Disconnected(self.plan.host, "not connected")
            try:
                invocation = await self._restore(text, label, report)
            except _Failure as exc:
                if text is None:
                    raise
                # The last good configuration fails too: the unit's own is the floor.
                self._step(self._current, "failed", f"{label} failed too: {exc.reason}")
                text, label, values = None, "the unit's original configuration", None
                report["reason"] += f"; {exc.reason} after going back: back on {label}"
                invocation = await self._restore(None, label, report)
        except (_Failure, RemoteError) as exc:
            self._step(self._current, "failed", str(exc))
            return self._finished(RolloutOutcome.FAILED, **report, rollback_error=str(exc))
        if values is None:
            service = self._expect or self.plan.service
            values = dict(read_flags(self.profile.flags, service.argv, service.environment))
        return self._finished(
            RolloutOutcome.ROLLED_BACK, **report, invocation_id=invocation, flags=values
        )

    def _rollback_target(
        self, previous: str | None
    ) -> tuple[str | None, str, dict[str, Any] | None]:
        """The last configuration that survived its soak (the host's history), never merely
        the previous drop-in; without a history, the drop-in that was there before."""
        good = self._history.last_good
        if good is None:
            return previous, "the previous configuration", dict(self.plan.old_values)
        return good.dropin, f"history entry {good.n} (last good)", dict(good.values)

    async def _restore(self, text: str | None, label: str, report: dict[str, Any]) -> str:
        """Put `text` back as our drop-in (None: none) and verify it like a change."""
        path = self.plan.dropin_path
        base = without_file(self._cat, path) if self._cat else ""
        self._expect = (
            effective_service(base + (f"# {path}\n{text}" if text is not None else ""))
            if base
            else None
        )
        self._step(RolloutStep.RESTORE, "running", label)
        await self._install(text)
        props = await self._show()
        current = props.get("InvocationID", "")
        if not self._restarted:  # never restarted: the server still runs the old command
            return current
        if self._failed_restarts is None:
            self._failed_restarts = int(props.get("NRestarts") or 0)
        exception = report["exception_line"] or "none logged"
        self._step(
            RolloutStep.RESET_FAILED,
            "running",
            f"recorded first: NRestarts {props.get('NRestarts', '?')}, last exception: {exception}",
        )
        await self.session.run(remote.systemctl_reset_failed(self.unit))
        self._step(RolloutStep.RESET_FAILED, "ok")
        invocation = await self._restart_and_wait(current)
        await self._smoke()
        await self._settle(invocation)
        await self._soak(invocation)
        return invocation

    async def _excerpt(self, invocation: str | None) -> tuple[str, ...]:
        """The failing invocation's journal, read back by `_SYSTEMD_INVOCATION_ID=`."""
        watch = self._watch
        fallback = tuple(watch.lines[-self.options.excerpt_lines :]) if watch else ()
        if invocation is None:
            return fallback
        command = remote.journal_read(
            self.unit, lines=self.options.excerpt_lines, invocation=invocation
        )
        try:
            result = await self._read(command)
        except RemoteError:
            return fallback
        entries = [e for line in result.stdout.splitlines() if (e := decode_entry("", line))]
        return tuple(e.message for e in entries) or fallback

    def _finished(
        self, outcome: RolloutOutcome, reason: str = "", **fields: Any
    ) -> RolloutFinished:
        return RolloutFinished(
            host=self.plan.host,
            outcome=outcome,
            reason=reason,
            duration_s=time.monotonic() - self._t0,
            **fields,
        )
