"""Probation: a kept change that dies later is rolled back by itself, after a countdown.

A change that survived its soak can still die minutes later (cuBLAS once more than 128
requests run for a while, OOM when the KV cache fills, a watchdog after a stall). So after a
change is kept (a rollout of `set`, the TUI's flag editor or a rollback ending "kept") the
host is on probation for `service.probation_s`. A crash or a restart of its service in that
window, seen by the fleet's monitor, is announced with a countdown of
`service.rollback_countdown_s` the operator can cancel; then the crash goes into the history
entry of the failed configuration (signature, stage "probation", last exception line,
seconds since it was kept) and the host goes back to its last good configuration through
the same verified rollout as `specops rollback` (diff, restart, health, smoke, soak).

The probation is read from the host's own history (the kept-at time of its newest entry),
never only from memory: a console started later knows a host is on probation, and a change
another console is making (its entry "started") is never mistaken for a crash. The history
is read again before anything is changed, so a host that moved on meanwhile is left alone.

Outside probation a crash stays an alert. `service.auto_rollback = false` and a read-only
console only announce that the host crashed on probation.

No Textual: the rollback starts here, on the loop that owns the sessions, through the one
path every change takes (console/tuning/change.py, action `probation-rollback`: history,
audit, ledger), so `specops watch` and the TUI do the same thing; a front end only shows
the events (`ProbationRolling`, then the rollout's, then `ProbationDone` with the outcome).

Past 500 lines because the window, the countdown, the rollback and the operator's cancel are
the states of one guard, observed from two threads; the rollback itself is the one path of a
change (change.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from console.hosts import clock as clocks
from console.hosts import tasks
from console.hosts.clock import SYSTEM, Clock
from console.hosts.events import (
    ChangeAction,
    CrashDetected,
    HostStateChanged,
    InvocationChanged,
    RolloutEvent,
)
from console.ledger import campaigns
from console.transport import remote
from console.transport.ssh import ConnState, HostSession, RemoteError
from console.tuning import history
from console.tuning.change import ChangeOutcome, change
from console.tuning.history import HistoryEntry, HistoryError
from console.tuning.invocation import EXCEPTION_RE
from console.tuning.plan import Plan, original_plan
from console.tuning.rollback import entry_plan
from console.watch.journal import decode_entry
from console.watch.signatures import crash_signature, record_signature

log = logging.getLogger(__name__)

STAGE = "probation"
UNSIGNED = (
    "it restarted with no crash signature in its journal (stopped, killed or restarted from "
    "outside?): an alert, not a rollback"
)
EXCERPT_LINES = 40
CONNECT_WAIT_S = 30.0
"""A host whose connection dropped again right after connecting has its history read once it
is back, for this long; later the next connection reads it."""


@dataclass(frozen=True)
class Probation:
    """A host on probation: the kept entry and its window (epoch seconds)."""

    host: str
    entry: HistoryEntry
    kept_at: float
    until: float

    def left_s(self, now: float) -> float:
        return max(0.0, self.until - now)

    def covers(self, at: float) -> bool:
        """Whether something that happened at `at` (journal time) is within the window."""
        return self.kept_at <= at <= self.until

    def label(self, now: float) -> str:
        """`probation 27m left` (for tables and status lines)."""
        left = self.left_s(now)
        return f"probation {left / 60:.0f}m left" if left >= 60 else f"probation {left:.0f}s left"


def probation_of(
    host: str, entries: Sequence[HistoryEntry], probation_s: float, now: float
) -> Probation | None:
    """The host's probation, or None: its newest entry is a kept change less than
    `probation_s` old. An entry still "started" (a change running), a failed one or a kept
    rollback (the operator's or probation's own: back where it chose) ends it."""
    if probation_s <= 0 or not entries:
        return None
    newest = max(entries, key=lambda e: e.n)
    if newest.outcome != "kept" or newest.finished_at is None:
        return None
    if newest.kind == "rollback":
        return None  # going back is the operator's (or probation's) choice: nothing to undo
    until = newest.finished_at + probation_s
    if now > until:
        return None
    return Probation(host, newest, newest.finished_at, until)


def rollback_entry(entries: Sequence[HistoryEntry], failed: HistoryEntry) -> HistoryEntry | None:
    """Where a probation rollback goes: the newest good entry before the failed one whose
    values differ from it (None: only the unit's original is left)."""
    return next(
        (
            e
            for e in reversed(entries)
            if e.good and e.n < failed.n and dict(e.values) != dict(failed.values)
        ),
        None,
    )


@dataclass(frozen=True)
class ProbationCrash:
    """What ended a run during probation, as the monitor saw it."""

    host: str
    entry: int
    """The kept history entry whose configuration failed."""
    invocation: str | None
    """The run that died."""
    at: float
    since_kept_s: float
    signature: str | None = None
    line: str = ""
    """The line that names the crash (or "the service restarted")."""
    rollout: str = ""
    """The group rollout the failed configuration came from (its history entry's), if any."""

    @property
    def kept_change(self) -> str:
        """`a kept change`, or `a kept change of rollout R`: an alert that names the group
        rollout, whose other hosts run the same configuration."""
        return f"a kept change of rollout {self.rollout}" if self.rollout else "a kept change"


# --- what the guard tells its front end ------------------------------------------------


@dataclass(frozen=True)
class ProbationAnnounced:
    """A crash during probation; a rollback follows in `countdown_s` unless `reason` says
    why not (auto_rollback = false, read-only) or the operator cancels."""

    host: str
    crash: ProbationCrash
    countdown_s: float
    target: str
    """Where it goes back to, in words (`history entry 3 (budget=8 …)`)."""
    reason: str | None = None
    """Why it will not roll back; None: it will."""


@dataclass(frozen=True)
class ProbationTick:
    host: str
    left_s: float


@dataclass(frozen=True)
class ProbationCancelled:
    host: str
    detail: str


@dataclass(frozen=True)
class ProbationRolling:
    """The countdown ran out: the rollback of `plan` starts now (its rollout events follow)."""

    host: str
    plan: Plan


@dataclass(frozen=True)
class ProbationDone:
    """The probation rollback ended (`ok`: healthy on the last good configuration) or was
    skipped (`skipped` says why: the host moved on meanwhile, nothing to go back to)."""

    host: str
    ok: bool
    detail: str
    skipped: bool = False
    outcome: ChangeOutcome | None = None
    """The rollback's own outcome, when one ran."""


@dataclass(frozen=True)
class ProbationState:
    """What the host's history says now: on probation (since which entry) or not."""

    host: str
    probation: Probation | None


@dataclass(frozen=True)
class CampaignSeen:
    """A tuning campaign owns the host now (`campaign`: its id and where it is), or no longer
    (None); read from the host's campaign records on connect and on every restart."""

    host: str
    campaign: str | None


ProbationEvent = (
    CampaignSeen
    | ProbationAnnounced
    | ProbationTick
    | ProbationCancelled
    | ProbationRolling
    | ProbationDone
    | ProbationState
)


def _entry(probation: Probation | None) -> int | None:
    return None if probation is None else probation.entry.n


def _values(values: Mapping[str, object]) -> str:
    return " ".join(f"{k}={v}" for k, v in values.items())


class ProbationGuard:
    """Watches the fleet's monitor events for crashes of hosts on probation, and acts.

    Feed it every event (`observe`); it reads the hosts' history itself. One instance per
    console, on the loop that owns the sessions.
    """

    def __init__(
        self,
        sessions: Mapping[str, HostSession],
        on_event: Callable[[ProbationEvent], None],
        *,
        on_rollout: Callable[[RolloutEvent], None] | None = None,
        source: str = "cli",
        read_only: str | None = None,
        countdown_s: float | None = None,
        clock: Clock = SYSTEM,
        tick_s: float = 1.0,
        on_window: Callable[[str, float | None], None] | None = None,
    ) -> None:
        self.sessions = sessions
        self.on_window = on_window
        """Told after every history read: seconds of probation the host has left (None: not
        on probation). The fleet keeps such a host open in on-demand mode (its crash watch
        needs the journal live)."""
        self.on_event = on_event
        self.on_rollout = on_rollout
        """Where the rollback's rollout events go (its progress, as a flag change's)."""
        self.source = source
        """The console part, as the ledger names it: "cli" (`specops watch`) or "tui"."""
        self.read_only = read_only
        """Why this console is read-only, e.g. `read-only (--read-only)` (alerts only), or
        None."""
        self.countdown_s = countdown_s
        """Overrides every profile's `service.rollback_countdown_s` (`watch --countdown`)."""
        self.clock = clock
        self.tick_s = tick_s
        self.probations: dict[str, Probation] = {}
        """The hosts known to be on probation (as of their last history read)."""
        self._handled: set[tuple[str, int]] = set()
        """(host, entry) whose crash was acted on: a crash loop is one probation failure."""
        self._busy: dict[str, asyncio.Task[None]] = {}
        self._cancel: dict[str, asyncio.Event] = {}
        self.rollbacks_failed = 0
        self.rolling: set[str] = set()
        """Hosts whose probation rollback runs now."""
        self._known: set[str] = set()
        """Hosts whose probation state was reported at least once."""
        self._tasks: set[asyncio.Task[None]] = set()
        self._campaigns: dict[str, str | None] = {}
        """What was last said of each host's campaign (`CampaignSeen`)."""

    # --- reading the history -----------------------------------------------------------

    async def refresh(self, host: str) -> Probation | None:
        """Read the host's history again: is it on probation now?"""
        session = self.sessions[host]
        profile = session.profile
        entries = await history.load(session, profile.service.unit)
        probation = probation_of(host, entries, profile.service.probation_s, self.clock.time())
        before = self.probations.get(host)
        if probation is None:
            self.probations.pop(host, None)
        else:
            self.probations[host] = probation
        if self.on_window is not None:
            self.on_window(host, None if probation is None else probation.left_s(self.clock.time()))
        if host not in self._known or _entry(before) != _entry(probation):
            self._known.add(host)
            self.on_event(ProbationState(host, probation))
        return probation

    def reread(self, host: str) -> None:
        """Read the host's history again soon (after a change of ours, on a timer); a
        changed probation state is reported as a `ProbationState`."""
        if host not in self.sessions or host in self._busy:
            return  # a crash being handled reads the history itself
        task = asyncio.create_task(self._refresh_quietly(host), name=f"probation-read:{host}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _refresh_quietly(self, host: str) -> None:
        if not await self.sessions[host].wait_connected(CONNECT_WAIT_S):
            return  # the next connection reads it
        try:
            await self.refresh(host)
        except (HistoryError, RemoteError) as exc:
            log.warning("%s: history unreadable: %s", host, exc)

    def state(self, host: str) -> Probation | None:
        probation = self.probations.get(host)
        if probation is not None and self.clock.time() > probation.until:
            return None
        return probation

    def counting_down(self, host: str | None = None) -> list[str]:
        """Hosts whose rollback countdown runs (the ones `cancel` would stop)."""
        return [h for h in self._cancel if host is None or h == host]

    # --- what the monitor says ---------------------------------------------------------

    def observe(self, event: object) -> None:
        """A fleet event: a crash or a restart of a host not already being handled; a
        (re)connected host has its history read. A crash or restart read back after the host
        was idle (on-demand mode) is left an alert: a host on probation is never idle, so it
        happened outside any probation this console watched, and nothing is rolled back for
        something no one saw happen."""
        if isinstance(event, HostStateChanged):
            if event.state.state is ConnState.CONNECTED:
                self.reread(event.host)
                self._look_for_campaign(event.host)
            return
        if isinstance(event, InvocationChanged):
            self._look_for_campaign(event.host)  # a campaign restarts the server every cell
        if isinstance(event, CrashDetected | InvocationChanged) and event.read_back:
            return
        if isinstance(event, CrashDetected):
            host, invocation, line = event.host, event.invocation, event.line
            signature: str | None = event.signature
        elif isinstance(event, InvocationChanged):
            host, invocation, signature = event.host, event.previous, None
            line = "the service restarted (a new invocation began)"
        else:
            return
        if host not in self.sessions or host in self._busy:
            return
        task = asyncio.create_task(
            self._handle(host, invocation, event.timestamp, signature, line),
            name=f"probation:{host}",
        )
        self._busy[host] = task
        task.add_done_callback(lambda _: self._busy.pop(host, None))

    def cancel(self, host: str | None = None) -> list[str]:
        """Stop the countdown of `host` (None: every one); the hosts cancelled."""
        hosts = self.counting_down(host)
        for name in hosts:
            self._cancel[name].set()
        return hosts

    async def stop(self) -> None:
        for task in [*self._busy.values(), *self._tasks]:
            await tasks.stop(task)

    # --- acting ------------------------------------------------------------------------

    async def _handle(
        self, host: str, invocation: str | None, at: float, signature: str | None, line: str
    ) -> None:
        try:
            probation = await self.refresh(host)
        except (HistoryError, RemoteError) as exc:
            log.warning("%s: history unreadable, crash left as an alert: %s", host, exc)
            return
        if probation is None or not probation.covers(at):
            return  # outside probation: the crash stays an alert
        if await self._campaign_owns(host):
            return  # a campaign's cell: the campaign measures, rolls back and records it
        key = (host, probation.entry.n)
        if key in self._handled or probation.entry.stage == STAGE:
            return  # acted on already (by this console, or one that noted it in the history)
        self._handled.add(key)
        crash = ProbationCrash(
            host,
            probation.entry.n,
            invocation,
            at,
            at - probation.kept_at,
            signature,
            line,
            rollout=probation.entry.rollout,
        )
        try:
            await self._act(probation, crash)
        except (HistoryError, RemoteError, ValueError) as exc:
            self.rollbacks_failed += 1
            self.on_event(ProbationDone(host, False, f"probation rollback stopped: {exc}"))
        except Exception as exc:  # a bug must reach the operator, never vanish in a task
            log.exception("%s: probation handling failed", host)
            self.rollbacks_failed += 1
            self.on_event(ProbationDone(host, False, f"probation rollback stopped: {exc!r}"))

    def _look_for_campaign(self, host: str) -> None:
        if host not in self.sessions:
            return
        task = asyncio.create_task(self._campaign_seen(host), name=f"campaign-read:{host}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _campaign_seen(self, host: str) -> None:
        session = self.sessions[host]
        try:
            running = await campaigns.load_all(session, session.profile.service.unit)
        except RemoteError:
            return  # the next connection or restart reads it
        holder = campaigns.holder(running, self.clock.time())
        seen = None
        if holder is not None:
            seen = f"campaign {holder.id}: {holder.done}/{len(holder.cells)} cells"
        if self._campaigns.get(host) != seen:
            self._campaigns[host] = seen
            self.on_event(CampaignSeen(host, seen))

    async def _campaign_owns(self, host: str) -> bool:
        """A tuning campaign runs on the host now (console/tuning/campaign.py's lock)."""
        session = self.sessions[host]
        try:
            running = await campaigns.load_all(session, session.profile.service.unit)
        except RemoteError:
            return False
        return campaigns.holder(running, self.clock.time()) is not None

    async def _act(self, probation: Probation, crash: ProbationCrash) -> None:
        host = probation.host
        session = self.sessions[host]
        service = session.profile.service
        if crash.signature is None:
            crash = await named(session, crash)
        entries = await history.load(session, service.unit)
        target = rollback_entry(entries, probation.entry)
        where = (
            f"history entry {target.n} ({_values(target.values)})"
            if target is not None
            else "the unit's original configuration"
        )
        reason = None
        if crash.signature is None:
            reason = UNSIGNED
        elif self.read_only is not None:
            reason = f"{self.read_only}: alert only"
        elif not service.auto_rollback:
            reason = "service.auto_rollback = false: not rolling back"
        countdown = service.rollback_countdown_s if self.countdown_s is None else self.countdown_s
        self.on_event(ProbationAnnounced(host, crash, countdown, where, reason))
        if crash.signature is None:
            # Nothing noted in the history either: a crash of this configuration later in
            # the window is still rolled back.
            self._handled.discard((host, probation.entry.n))
            return
        if self.read_only is not None:
            return  # not even the history: a read-only console changes nothing on a host
        if reason is not None:
            await self._record(session, crash, rolled_back=False, note=reason)
            return
        if not await self._countdown(host, countdown):
            note = "the operator cancelled the probation rollback; the host was left on it"
            await self._record(session, crash, rolled_back=False, note=note)
            self.on_event(ProbationCancelled(host, f"{host}: rollback cancelled; left alone"))
            return
        # The host may have moved on during the countdown (another console's change).
        current = await self.refresh(host)
        if current is None or current.entry.n != probation.entry.n:
            self.on_event(
                ProbationDone(host, True, "the host's history moved on: left alone", skipped=True)
            )
            return
        if not await history.claim_probation_rollback(session, service.unit, probation.entry):
            detail = "another console rolls it back: left to it"
            self.on_event(ProbationDone(host, True, detail, skipped=True))
            return
        await self._record(session, crash, rolled_back=True, note=f"rolled back to {where}")
        cat = (await session.run(remote.systemctl_cat(service.unit), timeout=30)).stdout
        if target is None:
            plan = original_plan(session.profile, cat)
        else:
            plan = entry_plan(session.profile, cat, target)
        if not plan.changed:
            self.on_event(
                ProbationDone(host, True, f"already on {where}: nothing to do", skipped=True)
            )
            return
        self.on_event(ProbationRolling(host, plan))
        self.rolling.add(host)
        try:
            outcome = await self._change(session, plan, crash)
        finally:
            self.rolling.discard(host)
        if not outcome.ok:
            self.rollbacks_failed += 1
        detail = f"back on {where}" if outcome.ok else f"the rollback to {where} failed"
        self.on_event(ProbationDone(host, outcome.ok, detail, outcome=outcome))
        with contextlib.suppress(HistoryError, RemoteError):
            await self.refresh(host)  # back where it was: the probation ends

    async def _change(
        self, session: HostSession, plan: Plan, crash: ProbationCrash
    ) -> ChangeOutcome:
        return await change(
            session,
            plan,
            action=ChangeAction.PROBATION_ROLLBACK,
            on_event=self.on_rollout,
            source=self.source,
            cause=f"{crash.signature or 'a restart'} {crash.since_kept_s:.0f}s after entry "
            f"{crash.entry} was kept" + (f" (rollout {crash.rollout})" if crash.rollout else ""),
            rollout=crash.rollout,
        )

    async def _countdown(self, host: str, seconds: float) -> bool:
        """True when it ran out; False when the operator cancelled it."""
        cancelled = self._cancel[host] = asyncio.Event()
        try:
            deadline = self.clock.monotonic() + seconds
            while (left := deadline - self.clock.monotonic()) > 0:
                self.on_event(ProbationTick(host, left))
                if await clocks.wait(self.clock, cancelled, min(self.tick_s, left)):
                    return False
            return not cancelled.is_set()
        finally:
            self._cancel.pop(host, None)

    async def _record(
        self, session: HostSession, crash: ProbationCrash, *, rolled_back: bool, note: str
    ) -> None:
        """The crash into the history entry of the configuration that failed."""
        unit = session.profile.service.unit
        excerpt = await failing_journal(session, unit, crash.invocation)
        found = excerpt_crash(excerpt)
        signature = crash.signature or (None if found is None else found[0])
        exception = next((ln.strip() for ln in reversed(excerpt) if EXCEPTION_RE.match(ln)), None)
        entries = await history.load(session, unit)
        for i, entry in enumerate(entries):
            if entry.n != crash.entry:
                continue
            what = signature or "a restart"
            entries[i] = replace(
                entry,
                outcome="rolled_back" if rolled_back else entry.outcome,
                reason=f"{what} {crash.since_kept_s:.0f}s after it was kept [{STAGE}]; {note}",
                signature=signature,
                stage=STAGE,
                kept_to_crash_s=round(crash.since_kept_s, 1),
                exception_line=exception,
                excerpt=tuple(excerpt[-history.EXCERPT_KEPT :]),
            )
            await history.save(session, unit, entries)
            return


async def named(session: HostSession, crash: ProbationCrash) -> ProbationCrash:
    """A restart seen before (or without) its crash line, named from the journal of the run
    that died: a console started after the crash, or one whose follower reconnected across
    it, still announces `cublas`, not `a restart`."""
    excerpt = await failing_journal(session, session.profile.service.unit, crash.invocation)
    found = excerpt_crash(excerpt)
    if found is None:
        return crash
    signature, line = found
    return replace(crash, signature=signature, line=line)


def excerpt_crash(excerpt: Sequence[str]) -> tuple[str, str] | None:
    """The crash the last lines of a dead run name, and the line that names it: from the first
    signature line on, read as one record (a wrapper such as `Scheduler hit an exception:` is
    named by the CUDA error further down)."""
    start = next((i for i, line in enumerate(excerpt) if crash_signature(line)), None)
    if start is None:
        return None
    rest = excerpt[start:]
    signature = record_signature(rest)
    assert signature is not None
    line = next((ln for ln in rest if crash_signature(ln) == signature), rest[0])
    return signature, line


async def failing_journal(
    session: HostSession, unit: str, invocation: str | None, lines: int = EXCERPT_LINES
) -> list[str]:
    """The last lines of the run that died, read back by its invocation id."""
    if invocation is None:
        return []
    try:
        command = remote.journal_read(unit, lines=lines, invocation=invocation)
        result = await session.run(command, timeout=30)
    except (RemoteError, remote.UnsafeArgument):
        return []
    found: list[str] = []
    for text in result.stdout.splitlines():
        entry = decode_entry("", text)
        if entry is not None:
            found.append(entry.message)
    return found
