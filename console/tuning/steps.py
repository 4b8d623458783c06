"""The steps a rollout is made of, each reported as a `RolloutProgress`.

`console.tuning.rollout.Rollout` strings these together (record, change, restart, watch,
smoke, soak; on failure the rollback, which reuses every step): here are the steps
themselves — write a drop-in atomically and verify systemd loaded what was planned, restart
and wait for the new invocation to be healthy while its journal is scanned for crashes, the
smoke completion, the first decode line, and the soak window (console/tuning/soak.py).
Each raises `StepFailure` with what it saw; none of them rolls anything back.
"""

from __future__ import annotations

import contextlib
import dataclasses
import posixpath
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from console.hosts import clock as clocks
from console.hosts.events import (
    ChangeAction,
    RolloutEvent,
    RolloutFinished,
    RolloutJournal,
    RolloutOutcome,
    RolloutProgress,
    RolloutStep,
    Throughput,
)
from console.service.health import readiness_path
from console.service.unit import ServiceExec, effective_service
from console.transport import http, remote
from console.transport.ssh import (
    CommandFailed,
    ConnState,
    Disconnected,
    HostSession,
    RemoteError,
    Result,
)
from console.tuning.gpu_evidence import gpus_now
from console.tuning.history import Recorder
from console.tuning.invocation import InvocationWatch
from console.tuning.plan import Plan
from console.tuning.smoke import server_api_key, smoke_completion
from console.tuning.soak import soak
from console.watch.signatures import CRASH_SIGNATURES

Listener = Callable[[RolloutEvent], None]
T = TypeVar("T")
RETRY_PAUSE_S = 0.5
SIGNATURE_RANK = {name: i for i, (name, _) in enumerate(CRASH_SIGNATURES)}


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
    command_timeout_s: float = 30.0
    """How long one read or other idempotent command may take (daemon-reload and restart have
    their own); one that takes longer while the link fails a probe is redone over a new
    connection."""
    excerpt_lines: int = 80
    action: ChangeAction = ChangeAction.SET
    """What asked for it, as the host's history names it (console/tuning/change.py)."""
    rollout: str = ""
    """The group rollout it is part of (console/tuning/group.py), for the history entry."""


class StepFailure(Exception):
    def __init__(
        self, reason: str, *, signature: str | None = None, phase: str | None = None
    ) -> None:
        super().__init__(reason)
        self.reason = reason
        self.signature = signature
        self.phase = phase


class RolloutSteps:
    """The steps of one change on one host, and how each is reported."""

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
        self.clock = session.clock
        """The session's clock: polls, deadlines, the soak (console/hosts/clock.py)."""
        self._t0 = self.clock.monotonic()
        self._touched = False
        self._restarted = False
        self._watch: InvocationWatch | None = None
        self._rollback = False
        self._current = RolloutStep.RECORD
        self._restarts = 0
        self._ready = False
        self._restored = False
        """In a rollback: the target drop-in is installed (and reloaded)."""
        self._expect: ServiceExec | None = None
        """In a rollback: the effective unit the restored drop-in must give."""
        self._history = Recorder(session, plan, options.action, options.rollout)
        self._abandoned: tuple[str, ...] = ()
        self._failed_restarts: int | None = None
        self._cat = ""
        self._gpus_at_ready: tuple[dict[str, Any], ...] = ()

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
        elapsed = self.clock.monotonic() - self._t0
        if state == "running":
            self._current = step
        self._emit(RolloutProgress(self.plan.host, step, state, detail, elapsed, self._rollback))

    def _lines(self, invocation: str, lines: list[str]) -> None:
        self._emit(RolloutJournal(self.plan.host, invocation, tuple(lines)))

    # --- remote helpers ----------------------------------------------------------------

    async def _retrying(self, step: Callable[[], Awaitable[T]]) -> T:
        """Run an idempotent step again after the link drops, until it succeeds or the link
        has stayed down `reconnect_s`. A session may still say "connected" for a moment after
        its link died (issue 20: 7 of 21 fault runs abandoned a rollback on the first failed
        command), so only a command that completes proves the reconnect.

        A command that timed out while the link fails a probe met a partition the keepalives
        have not noticed yet (15 s × 3 by default): the connection is made again and the step
        redone. `reconnect_s` counts from the first failure, so a command that hung for its
        whole timeout still leaves the link its time to come back (issue 30: a 20 s partition
        right after a failed start ended the rollback with the host healthy on the old
        setting)."""
        deadline: float | None = None
        while True:
            try:
                return await step()
            except Disconnected as exc:
                failure: RemoteError = exc
            except RemoteError as exc:
                if isinstance(exc, CommandFailed) or not await self._link_down():
                    raise
                failure = exc
            now = self.clock.monotonic()
            if deadline is None:
                deadline = now + self.options.reconnect_s
            if now >= deadline:
                raise failure
            if self.session.state.state is ConnState.CONNECTED:
                self.session.drop_link()  # stalled rather than closed: connect again now
            await self.session.wait_connected(deadline - now)
            pause = min(RETRY_PAUSE_S, max(0.0, deadline - self.clock.monotonic()))
            await clocks.sleep(self.clock, pause)

    async def _link_down(self) -> bool:
        """Whether the link fails a cheap read now: a step that failed over HTTP (the port
        "closed", a reset) may have failed because the link went, not the server."""
        return not await self.session.answers()

    async def _idempotent(self, command: remote.Command, timeout: float | None = None) -> Result:
        """An idempotent command (`mkdir -p`, `rm -f`, daemon-reload, reset-failed, restart),
        given `command_timeout_s` unless it says otherwise."""
        limit = self.options.command_timeout_s if timeout is None else timeout
        return await self._retrying(lambda: self.session.run(command, timeout=limit))

    async def _read(self, command: remote.Command) -> Result:
        """A read-only command, retried across a reconnect."""
        return await self._idempotent(command)

    async def _show(self) -> dict[str, str]:
        result = await self._read(remote.systemctl_show(self.unit))
        return remote.parse_show(result.stdout)

    def _api_key(self) -> str | None:
        """The API key of the command now running: the new one, or the old in a rollback."""
        if self._rollback:
            return server_api_key(self.plan.service.argv, self.plan.service.environment)
        return server_api_key(self.plan.new_argv, self.plan.new_environment)

    async def _health(self) -> tuple[bool, str]:
        try:
            path = readiness_path(self.plan.release, self.profile.service.health_path)
            response = await http.request(
                self.session, self.profile.service.port, "GET", path, api_key=self._api_key()
            )
        except http.PortClosed:
            return False, "port closed"
        except http.HttpError as exc:
            return False, str(exc)
        except Disconnected:
            if not await self.session.wait_connected(self.options.reconnect_s):
                raise
            return False, "reconnected"
        return response.status == 200, f"{path} {response.status}"

    # --- the sequence ------------------------------------------------------------------

    async def _install(self, text: str | None) -> None:
        """Write (or with None remove) our drop-in atomically, daemon-reload, verify."""
        path = self.plan.dropin_path
        step = RolloutStep.RESTORE if self._rollback else RolloutStep.WRITE
        self._step(step, "running", path)
        if text is None:
            self._touched = True
            await self._idempotent(remote.remove(path))
            self._step(step, "ok", f"removed {path}")
        else:
            directory = posixpath.dirname(path)
            tmp = posixpath.join(directory, f".{posixpath.basename(path)}.tmp")
            await self._idempotent(remote.make_dirs(directory))

            async def write_and_rename() -> None:  # as a pair: a lost `mv` reply redoes both
                # 0600 before a byte is written: the drop-in holds the secret flags' values.
                limit = self.options.command_timeout_s
                await self.session.run(remote.create_private(tmp), timeout=limit)
                await self.session.run(remote.write_file(tmp, text), timeout=limit)
                self._touched = True
                await self.session.run(remote.move(tmp, path), timeout=limit)

            try:
                await self._retrying(write_and_rename)
            except RemoteError:
                with contextlib.suppress(RemoteError):
                    await self.session.run(remote.remove(tmp))
                raise
            self._step(step, "ok", f"{path} ({len(text.encode())} bytes, via rename)")
        self._step(RolloutStep.DAEMON_RELOAD, "running")
        await self._idempotent(remote.systemctl_daemon_reload(), timeout=120)
        self._step(RolloutStep.DAEMON_RELOAD, "ok")
        props = await self._show()
        if props.get("NeedDaemonReload") != "no":
            raise StepFailure(
                f"NeedDaemonReload={props.get('NeedDaemonReload')} after daemon-reload"
            )
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
            raise StepFailure(
                f"after daemon-reload the unit has {len(effective.commands)} ExecStart="
            )
        if self._rollback:
            target = self._expect or self.plan.service
            argv, env = target.argv, target.environment
        else:
            argv, env = list(self.plan.new_argv), self.plan.new_environment
        managed = {s.env for s in self.profile.flags.values() if s.env is not None}
        now_env = {k: v for k, v in effective.environment.items() if k in managed}
        if effective.argv != argv or now_env != {k: v for k, v in env.items() if k in managed}:
            raise StepFailure(
                f"after daemon-reload the effective ExecStart/Environment is not the planned one "
                f"(ExecStart= from {effective.execstart_source}; a drop-in sorting after "
                f"{posixpath.basename(self.plan.dropin_path)} overrides it?)"
            )

    async def _restart_and_wait(self, old_invocation: str) -> str:
        assert self._watch is not None
        self._step(RolloutStep.RESTART, "running")
        self._restarted = True
        await self._idempotent(remote.systemctl_restart(self.unit), timeout=self.ready_timeout_s)
        self._step(RolloutStep.RESTART, "ok")
        started = self.clock.monotonic()
        self._step(RolloutStep.INVOCATION, "running")
        while True:
            props = await self._show()
            invocation = props.get("InvocationID", "")
            if invocation and invocation != old_invocation:
                break
            if props.get("ActiveState") == "failed":
                raise StepFailure(f"the unit failed to start (Result={props.get('Result')})")
            if self.clock.monotonic() - started > self.options.invocation_timeout_s:
                raise StepFailure("systemd started no new invocation after the restart")
            await clocks.sleep(self.clock, min(self.options.poll_s, 0.5))
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
            raise StepFailure(
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
            if self.clock.monotonic() >= next_poll or watch.phase != polled_phase:
                polled_phase = watch.phase
                next_poll = self.clock.monotonic() + self.options.poll_s
                if await self._ready_now(invocation, restarts, started):
                    return
            watch.changed.clear()
            await clocks.wait(self.clock, watch.changed, next_poll - self.clock.monotonic())

    async def _ready_now(self, invocation: str, restarts: int, started: float) -> bool:
        watch = self._watch
        assert watch is not None
        props = await self._show()
        now_restarts = int(props.get("NRestarts") or 0)
        if props.get("ActiveState") == "failed":
            raise StepFailure(f"the unit failed (Result={props.get('Result')})", phase=watch.phase)
        if now_restarts > restarts or props.get("InvocationID") not in ("", invocation):
            raise StepFailure(
                f"systemd restarted the server (NRestarts {restarts} → {now_restarts})",
                phase=watch.phase,
            )
        healthy, detail = await self._health()
        self._check_crash()
        elapsed = self.clock.monotonic() - started
        timeout = self.ready_timeout_s
        if healthy:
            self._ready = True
            self._step(RolloutStep.READY, "ok", f"healthy after {elapsed:.0f}s")
            if not self._rollback:  # what the GPUs hold with the new setting, for a crash
                self._gpus_at_ready = await gpus_now(self.session, self.profile)
            return True
        if elapsed > timeout:
            raise StepFailure(
                f"not healthy within ready_timeout_s={timeout:.0f}s ({detail})", phase=watch.phase
            )
        progress = f"{elapsed:.0f}s/{timeout:.0f}s {watch.phase}; {detail}"
        self._step(RolloutStep.READY, "waiting", progress)
        return False

    async def _smoke(self) -> None:
        smoke = self.profile.service.smoke
        self._step(RolloutStep.SMOKE, "running", f"{smoke.prompt!r} must contain {smoke.expect!r}")

        async def attempt() -> str:
            try:
                return await smoke_completion(self.session, self._api_key())
            except http.HttpError as exc:
                if await self._link_down():  # redone once the link is back
                    raise Disconnected(self.plan.host, f"smoke test: {exc}") from None
                raise StepFailure(f"smoke test: {exc}", phase="serving") from None

        answer = await self._retrying(attempt)
        self._check_crash()
        if smoke.expect not in answer:
            raise StepFailure(
                f"smoke test: {smoke.prompt!r} answered {answer!r}, expected {smoke.expect!r}",
                phase="serving",
            )
        self._step(RolloutStep.SMOKE, "ok", f"answered {answer.strip()!r}")

    async def _settle(self, invocation: str) -> float | None:
        """Keep watching until the first decode line (its accept length) or `settle_s`."""
        watch = self._watch
        assert watch is not None
        self._step(RolloutStep.SETTLE, "running")
        deadline = self.clock.monotonic() + self.options.settle_s
        while watch.accept_len is None and self.clock.monotonic() < deadline:
            self._check_crash()
            watch.changed.clear()
            await clocks.wait(self.clock, watch.changed, deadline - self.clock.monotonic())
        self._check_crash()
        props = await self._show()
        if props.get("InvocationID") != invocation or props.get("ActiveState") != "active":
            raise StepFailure(
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

    async def _soak(self, invocation: str) -> Throughput | None:
        """Keep watching the new invocation for `soak_s`; then /health must still be 200.
        Returns the generation throughput of the decode lines logged meanwhile (with no
        soak, of those the rollout saw)."""
        watch = self._watch
        assert watch is not None
        seconds = self.soak_s
        if seconds <= 0:
            self._step(RolloutStep.SOAK, "skipped", "soak_s = 0")
            return Throughput.of(watch.gen_throughputs)
        start = len(watch.gen_throughputs)
        self._step(RolloutStep.SOAK, "running", f"{seconds:g}s")

        async def check() -> None:
            self._check_crash()
            props = await self._show()
            restarts = int(props.get("NRestarts") or 0)
            if props.get("InvocationID") != invocation or restarts > self._restarts:
                raise StepFailure(
                    f"systemd restarted the server during the soak (NRestarts "
                    f"{self._restarts} → {restarts})",
                    phase=watch.phase,
                )
            if props.get("ActiveState") != "active":
                raise StepFailure(
                    f"the server stopped during the soak ({props.get('ActiveState')}, "
                    f"Result={props.get('Result')})",
                    phase=watch.phase,
                )

        def report(countdown: str) -> None:
            self._step(RolloutStep.SOAK, "waiting", countdown)

        await soak(
            watch, seconds, poll_s=self.options.poll_s, check=check, report=report, clock=self.clock
        )
        healthy, detail = await self._health()
        self._check_crash()
        if not healthy:
            raise StepFailure(f"not healthy at the end of the soak ({detail})", phase=watch.phase)
        accept = watch.last_accept_len
        throughput = Throughput.of(watch.gen_throughputs[start:])
        tail = f", accept len {accept:.2f}" if accept is not None else ""
        tail += f", gen {throughput.text()}" if throughput is not None else ""
        self._step(RolloutStep.SOAK, "ok", f"{seconds:g}s on invocation {invocation[:12]}{tail}")
        return throughput

    def _finished(
        self, outcome: RolloutOutcome, reason: str = "", **fields: Any
    ) -> RolloutFinished:
        finished = RolloutFinished(
            host=self.plan.host,
            outcome=outcome,
            reason=reason,
            duration_s=self.clock.monotonic() - self._t0,
            warnings=tuple(self._watch.warnings) if self._watch is not None else (),
            **fields,
        )
        if finished.flags:  # shown and recorded: secret values masked
            finished = dataclasses.replace(finished, flags=self.plan.masked(finished.flags))
        return finished
