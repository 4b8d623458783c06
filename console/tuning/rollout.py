"""Apply a flag change so that it ends healthy on the new setting or back on the old one.

The hand-run routine this replaces (sed the unit, daemon-reload, restart, curl, squint at the
journal) fails in quiet ways: `systemctl restart` returns 0 for a server that dies a minute
later in CUDA graph capture, an edited unit is half-written, nobody remembers the old line.
A `Rollout` runs DESIGN §5 step by step and reports each step as a `RolloutProgress`:

record InvocationID, NRestarts, the current drop-in and a journal cursor → write the drop-in
to a temp name and rename it → daemon-reload → check NeedDaemonReload=no → restart → wait for
a new InvocationID → watch that invocation's journal for crash signatures while polling
`/health` through the SSH connection → smoke completion → wait for the first decode line →
soak for `service.soak_s` (console/tuning/soak.py); the host's history entry, rewritten "kept",
makes it the host's last good configuration (only a soaked change becomes one).

Every rollout is an entry in the host's own history (console/tuning/history.py), written
"started" before anything changes and rewritten with the outcome.

Any failure (a crash signature, the unit failed, systemd restarting it, no health before
`ready_timeout_s`, a wrong smoke answer, a crash in the soak) keeps the failing journal
excerpt, names its stage and rolls back to the last configuration that survived its soak:
restore that drop-in (or remove ours), daemon-reload, record NRestarts, reset-failed,
restart, and verify it like a change (health, smoke, soak); if it fails too, the unit's
original configuration. The steps themselves are in console/tuning/steps.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from typing import Any

from console.hosts.events import (
    RolloutFinished,
    RolloutOutcome,
    RolloutStep,
)
from console.hosts.profiles import SECRET_MASK
from console.service.flags import read_flags
from console.service.unit import effective_service, without_file
from console.transport import remote
from console.transport.ssh import Disconnected, RemoteError
from console.tuning.gpu_evidence import at_crash
from console.tuning.history import HistoryError, abandoned_note
from console.tuning.invocation import InvocationWatch
from console.tuning.left_on import ROLLBACK_FAILED
from console.tuning.rollback import entry_plan
from console.tuning.soak import stage_of
from console.tuning.steps import (
    SIGNATURE_RANK,
    RolloutOptions,
    RolloutSteps,
    StepFailure,
)
from console.watch.journal import decode_entry
from console.watch.signatures import crash_signature

__all__ = ["Rollout", "RolloutOptions"]

_Failure = StepFailure


CRASH_LINE_WAIT_S = 3.0
"""After systemd says the server died, how long its crash lines may take to arrive."""


async def _crash_line(watch: InvocationWatch, timeout: float) -> None:
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(timeout):
            while watch.signature is None:
                watch.changed.clear()
                await watch.changed.wait()


class Rollout(RolloutSteps):
    """One change on one host. `await run()` returns how it ended; it never raises for a
    remote failure (those end as FAILED or ROLLED_BACK with the reason)."""

    async def run(self) -> RolloutFinished:
        self._t0 = self.clock.monotonic()
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
            recorded = result
            if result.rollback_error:  # what `specops status` reads back (tuning/left_on.py)
                sep = ROLLBACK_FAILED if self.options.rollback else "; "  # "; not rolled back"
                reason = f"{result.reason}{sep}{result.rollback_error}"
                recorded = dataclasses.replace(result, reason=reason)
            try:
                entry = await self._history.end(recorded, self._failed_restarts)
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
            return self._finished(
                RolloutOutcome.FAILED,
                f"{exc}; nothing was changed",
                unreachable=await self._link_lost(exc),
                untouched=True,
            )
        self._watch = InvocationWatch(self.session, self.unit, cursor, self._lines)
        self._watch.start()
        try:
            await self._install(self.plan.dropin)
            invocation = await self._restart_and_wait(old_invocation)
            await self._smoke()
            accept_len = await self._settle(invocation)
            throughput = await self._soak(invocation)
        except (_Failure, RemoteError) as exc:
            failure = exc if isinstance(exc, _Failure) else _Failure(str(exc))
            return await self._fail(failure, previous, cause=exc)
        return self._finished(
            RolloutOutcome.APPLIED,
            invocation_id=invocation,
            flags=dict(self.plan.new_values),
            accept_len=accept_len,
            throughput=throughput,
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

    # --- failure and rollback ----------------------------------------------------------

    async def _link_lost(self, exc: BaseException) -> bool:
        """Did `exc` come from the link rather than the host? (A session may say connected
        for a moment after its link died, so a `Disconnected` counts whatever it says.)"""
        return isinstance(exc, Disconnected) or await self._link_down()

    async def _fail(
        self, failure: _Failure, previous: str | None, *, cause: BaseException | None = None
    ) -> RolloutFinished:
        """Report `failure` and roll back; `cause`: what raised it, to tell a lost link."""
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
            if found is not None and (
                signature is None or SIGNATURE_RANK[found] < SIGNATURE_RANK[signature]
            ):
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
        xids: tuple[str, ...] = ()
        gpus: tuple[dict[str, Any], ...] = ()
        if self._restarted and signature is not None:  # the GPUs' side of the crash
            crash_at = watch.crash_at if watch is not None else None
            xids, gpus = await at_crash(self.session, self.profile, crash_at)
        report: dict[str, Any] = {
            "reason": reason,
            "signature": signature,
            "phase": failure.phase,
            "excerpt": excerpt,
            "failed_invocation": failed,
            "stage": stage,
            "ready_to_crash_s": ready_to_crash,
            "exception_line": exception_line,
            "xids": xids,
            "gpus_at_ready": self._gpus_at_ready,
            "gpus_at_crash": gpus,
        }
        if not self._touched:
            return self._finished(
                RolloutOutcome.FAILED,
                **{**report, "reason": f"{reason}; nothing changed"},
                unreachable=cause is not None and await self._link_lost(cause),
            )
        if not self.options.rollback:
            return self._finished(
                RolloutOutcome.FAILED,
                **report,
                flags=dict(self.plan.new_values),
                rollback_error="not rolled back (--no-rollback): the new setting is in place",
                unreachable=cause is not None and await self._link_lost(cause),
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
        except Disconnected as exc:
            left = self._left_on()
            self._step(self._current, "failed", f"{exc}; {left}")
            return self._finished(
                RolloutOutcome.FAILED,
                **report,
                flags=dict(self.plan.new_values),
                rollback_error=f"could not roll back within reconnect_s="
                f"{self.options.reconnect_s:g}s ({exc}): {left}",
                unreachable=True,
            )
        except (_Failure, RemoteError) as exc:
            if await self._link_lost(exc):  # e.g. a command timed out as the link went
                left = self._left_on()
                self._step(self._current, "failed", f"{exc}; {left}")
                return self._finished(
                    RolloutOutcome.FAILED,
                    **report,
                    flags=dict(self.plan.new_values),
                    rollback_error=f"the link went while rolling back ({exc}): {left}",
                    unreachable=True,
                )
            self._step(self._current, "failed", str(exc))
            return self._finished(RolloutOutcome.FAILED, **report, rollback_error=str(exc))
        if values is None:
            service = self._expect or self.plan.service
            values = dict(read_flags(self.profile.flags, service.argv, service.environment))
        return self._finished(
            RolloutOutcome.ROLLED_BACK, **report, invocation_id=invocation, flags=values
        )

    def _left_on(self) -> str:
        """Which configuration a host whose link stayed down is left on, as far as known."""
        values = " ".join(f"{k}={v}" for k, v in self.plan.new_values.items())
        if self._restored:
            return (
                f"the restored drop-in is on disk, but the server may still run the failed "
                f"setting ({values}) until it restarts"
            )
        return f"the host is LEFT ON THE FAILED SETTING {values} ({self.plan.dropin_path})"

    def _rollback_target(
        self, previous: str | None
    ) -> tuple[str | None, str, dict[str, Any] | None]:
        """The last configuration that survived its soak (the host's history), never merely
        the previous drop-in; without a history, the drop-in that was there before."""
        good = self._history.last_good
        if good is None:
            return previous, "the previous configuration", dict(self.plan.old_values)
        dropin = good.dropin
        if dropin is not None and SECRET_MASK in dropin:
            # The history holds secrets masked: the entry's flags go back on the unit as it
            # is, whose secret values stay as they are (a rollback never restores a secret).
            dropin = entry_plan(self.profile, self._cat, good).dropin
        return dropin, f"history entry {good.n} (last good)", dict(good.values)

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
        self._restored = True
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
        await self._idempotent(remote.systemctl_reset_failed(self.unit))
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
