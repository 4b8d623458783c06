"""Changing a host's flags safely from the TUI: the flag editor (`f`), the host's history
and rollbacks (`h`, `R`), the rollout that runs either on the engine, and the probation
rollbacks it arms (`x` cancels them). Every change shows on its own rollout screen."""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging

from textual import on

from console.hosts.events import RolloutEvent
from console.hosts.profiles import FlagValue
from console.ledger.ledger import NotOnHost, current_invocation, record_rollout, utc_now
from console.local.audit import action_record
from console.local.state import load_last_good
from console.transport.ssh import HostSession, RemoteError
from console.tuning.flag_history import flag_history
from console.tuning.history_rows import read_host_history
from console.tuning.plan import Plan, prepare
from console.tuning.probation import ProbationEvent
from console.tuning.rollback import prepare_rollback
from console.tuning.rollout import Rollout, RolloutOptions
from console.ui.shell import NOTIFY_TIMEOUT_S, Shell
from widgets.flag_editor import FlagEditorScreen
from widgets.history_view import HistoryScreen
from widgets.probation_banner import ProbationBanner, ProbationUpdated, probation_note
from widgets.rollback_confirm import RollbackConfirmScreen, RollbackPlanner
from widgets.rollout_view import (
    OUTCOME_SEVERITY,
    RolloutScreen,
    RolloutUpdated,
    outcome_text,
    rollout_group,
)

log = logging.getLogger(__name__)


class RolloutActions(Shell):
    """A flag change or a rollback: planned, confirmed, then run as an app worker."""

    _rollout_screens: dict[str, RolloutScreen]
    """The newest rollout screen per host: where that host's rollout events are shown."""

    # --- flags -----------------------------------------------------------------------------

    def action_edit_flags(self) -> None:
        if self.read_only:
            self.notify("read-only: flag changes are disabled", title="flags", severity="warning")
            return
        name = self.selected_host
        if name is None or len(self.screen_stack) > 1:  # one editor at a time, from the main view
            return
        if any(w.group == rollout_group(name) and not w.is_finished for w in self.workers):
            self.notify(f"{name}: a flag change is already running", title="flags")
            return
        session = self.fleet.sessions[name]
        status = self.fleet.status.get(name)

        async def planner(changes: dict[str, FlagValue]) -> Plan:
            return await self.on_hosts([name], lambda: prepare(session, changes), "flags")

        last_good = load_last_good(name)
        crashed = [c.flags for c in self.fleet.monitors[name].crashes if c.flags]
        # Without a last good configuration, the values running now are the baseline: a
        # value that crashed is one that differs from them (not every value of that run).
        baseline = last_good.values if last_good else (status.flags if status else None)
        history = flag_history(session.profile.flags, baseline, crashed, good=last_good is not None)
        editor = FlagEditorScreen(
            session.profile, status.flags if status else {}, planner, history=history
        )
        self.push_screen(editor, callback=self._flags_confirmed)

    def _flags_confirmed(self, plan: Plan | None, kind: str = "change") -> None:
        if plan is None:
            return
        screen = RolloutScreen(plan, kind=kind)
        self._rollout_screens[plan.host] = screen
        self.push_screen(screen)
        self._start_rollout(plan, kind=kind)

    # --- history and rollback (the same diff, confirm and rollout as a flag change) -------

    def _rollback_refused(self, name: str) -> str | None:
        if self.read_only:
            return "read-only: rollbacks are disabled"
        if any(w.group == rollout_group(name) and not w.is_finished for w in self.workers):
            return f"{name}: a flag change is already running"
        return None

    def _rollback_planner(self, name: str, to: int | None, original: bool) -> RollbackPlanner:
        session = self.fleet.sessions[name]
        return lambda: self.on_hosts(
            [name], lambda: prepare_rollback(session, to=to, original=original), "rollback"
        )

    def _rollback_confirmed(self, plan: Plan | None) -> None:
        refused = self._rollback_refused(plan.host) if plan is not None else None
        if refused is not None:  # a change started meanwhile, from another screen
            self.notify(refused, title="rollback", severity="warning", markup=False)
        else:
            self._flags_confirmed(plan, "rollback")

    def action_show_history(self) -> None:
        name = self.selected_host
        if name is None or len(self.screen_stack) > 1:
            return
        session = self.fleet.sessions[name]
        screen = HistoryScreen(
            name,
            session.profile.service.unit,
            lambda: self.on_hosts([name], lambda: read_host_history(session), "history"),
            lambda to, original: self._rollback_planner(name, to, original),
            refused=lambda: self._rollback_refused(name),
        )
        self.push_screen(screen, callback=self._rollback_confirmed)

    def action_rollback(self) -> None:
        """`R`: back to the selected host's previous good configuration (its own history)."""
        name = self.selected_host
        if name is None or len(self.screen_stack) > 1:
            return
        refused = self._rollback_refused(name)
        if refused is not None:
            self.notify(refused, title="rollback", severity="warning", markup=False)
            return
        unit = self.fleet.profiles[name].service.unit
        planner = self._rollback_planner(name, None, False)
        what = "the previous good configuration"
        screen = RollbackConfirmScreen(name, unit, what, planner)
        self.push_screen(screen, callback=self._rollback_confirmed)

    # --- rollout -------------------------------------------------------------------------

    def _start_rollout(
        self,
        plan: Plan,
        *,
        kind: str = "change",
        source: str = "tui",
        done: concurrent.futures.Future[bool] | None = None,
    ) -> None:
        """Run a flag change on the engine as an app worker: it outlives its screen.

        `done` (a probation rollback's) learns whether it ended healthy."""
        host = plan.host

        def event(event: RolloutEvent) -> None:  # on the engine's thread
            self.post_message(RolloutUpdated(event))

        async def run() -> None:
            self.engine.call(self.left_on.hold, host)  # its own "started" entry is no finding
            try:
                async with self.holding([host], kind):  # opened first if it was idle
                    await changing()
            finally:
                self.engine.call(self.left_on.release, host)

        async def changing() -> None:
            session = self.fleet.sessions[host]
            rollout = Rollout(session, plan, on_event=event, options=RolloutOptions(kind=kind))
            try:  # the run the change leaves, for the experiment ledger
                before: str | None = await self.engine.run(current_invocation(session))
            except (RemoteError, OSError):
                before = None
            started = utc_now()
            try:
                result = await self.engine.run(rollout.run())
            except Exception as exc:  # a bug must reach the operator, never vanish
                log.exception("%s: rollout crashed", host)
                self.notify(f"{host}: rollout stopped: {exc}", severity="error", markup=False)
                self._audit_action(plan, f"stopped: {exc}", kind)
                if done is not None:
                    done.set_result(False)
                return
            if done is not None:
                done.set_result(result.ok)
            self._audit_action(plan, result.summary(), kind)
            self.notify(
                outcome_text(result),
                title="rollback" if kind == "rollback" else "flag change",
                severity=OUTCOME_SEVERITY[result.outcome],
                timeout=NOTIFY_TIMEOUT_S,
                markup=False,
            )
            self.engine.call(self.fleet.refresh_status, host)
            self.engine.call(self.probation.reread, host)  # a kept change starts a probation
            try:
                recording = record_rollout(
                    session, plan, result, before_invocation=before, started=started, source=source
                )
                await self.engine.run(recording)
            except NotOnHost as exc:
                self.notify(f"experiment not in the host's ledger: {exc}", severity="warning")
            except (RemoteError, OSError) as exc:
                self.notify(f"{host}: experiment not recorded: {exc}", severity="warning")

        self.run_worker(
            run(),
            group=rollout_group(host),
            exit_on_error=False,
            description=f"{host}: {plan.summary()}",
        )

    def _audit_action(self, plan: Plan, outcome: str, kind: str = "change") -> None:
        if self.fleet.on_action is not None:
            action = "rollback" if kind == "rollback" else "flags"
            entry = action_record(plan.host, action, plan.summary(), outcome, plan.dropin)
            self.fleet.on_action(entry)

    # --- probation -----------------------------------------------------------------------

    async def _probation_rollback(self, session: HostSession, plan: Plan) -> bool:
        """On the engine: the probation rollback, shown and recorded like a flag change."""
        done: concurrent.futures.Future[bool] = concurrent.futures.Future()
        self.call_from_thread(self._show_rollout, plan, done)
        return await asyncio.wrap_future(done)

    def _show_rollout(self, plan: Plan, done: concurrent.futures.Future[bool]) -> None:
        screen = RolloutScreen(plan, kind="rollback")
        self._rollout_screens[plan.host] = screen
        self.push_screen(screen)
        self._start_rollout(plan, kind="rollback", source="probation", done=done)

    def _probation_posted(self, event: ProbationEvent) -> None:  # on the engine's thread
        self.post_message(ProbationUpdated(event))

    @on(ProbationUpdated)
    def _probation_event(self, message: ProbationUpdated) -> None:
        if banner := self.main(ProbationBanner):
            banner.show(message.event)
        note = probation_note(message.event)
        if note is not None:
            text, severity = note
            self.notify(text, title="probation", severity=severity, markup=False)

    def action_probation_cancel(self) -> None:
        """`x`: cancel the probation rollbacks counting down (they leave the hosts alone)."""
        self.engine.call(self.probation.cancel)

    @on(RolloutUpdated)
    def _rollout_event(self, message: RolloutUpdated) -> None:
        screen = self._rollout_screens.get(message.event.host)
        if screen is not None and screen.is_attached:  # events for a closed screen are dropped
            screen.show(message.event)
