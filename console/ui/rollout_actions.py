"""Changing a host's flags safely from the TUI: the flag editor (`f`), the host's history
and rollbacks (`h`, `R`), and the probation rollbacks the engine runs (`x` cancels them).

A change or a rollback is planned and confirmed here, then runs on the engine through the one
path of every change (console/tuning/change.py: history, audit, ledger), as an app worker
that outlives its screen. A probation rollback starts in the domain (the guard, on the
engine) exactly as in `specops watch`; this module only shows it. Every change shows on its
own rollout screen.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from textual import on

from console.hosts.events import ChangeAction, RolloutEvent
from console.hosts.profiles import FlagValue
from console.transport.ssh import RemoteError
from console.tuning import history
from console.tuning.change import ChangeOutcome, change
from console.tuning.flag_history import flag_history
from console.tuning.group_plan import GroupPlan
from console.tuning.history import HistoryEntry
from console.tuning.history_rows import read_host_history
from console.tuning.plan import Plan, prepare
from console.tuning.probation import (
    CampaignSeen,
    ProbationDone,
    ProbationEvent,
    ProbationRolling,
)
from console.tuning.rollback import prepare_rollback
from console.ui.shell import NOTIFY_TIMEOUT_S, Shell
from widgets.campaign_view import campaign_group
from widgets.flag_editor import FlagEditorScreen
from widgets.history_view import HistoryScreen
from widgets.host_table import HostTable
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
    _in_group_rollout: set[str]
    """Hosts a group rollout of this console is changing (console/ui/group_actions.py)."""

    # --- flags -----------------------------------------------------------------------------

    def action_edit_flags(self) -> None:
        if self.read_only:
            self.notify("read-only: flag changes are disabled", title="flags", severity="warning")
            return
        name = self.selected_host
        if name is None or len(self.screen_stack) > 1:  # one editor at a time, from the main view
            return
        if self._changing(name):
            self.notify(f"{name}: a flag change is already running", title="flags")
            return
        session = self.fleet.sessions[name]
        status = self.fleet.status.get(name)
        crashed = [c.flags for c in self.fleet.monitors[name].crashes if c.flags]
        running = status.flags if status else None

        def hints(good: HistoryEntry | None) -> dict[str, str]:
            # Without a last good configuration, the values running now are the baseline: a
            # value that crashed is one that differs from them (not every value of that run).
            baseline = good.values if good else running
            return flag_history(session.profile.flags, baseline, crashed, good=good is not None)

        async def planner(changes: dict[str, FlagValue]) -> Plan:
            return await self.on_hosts([name], lambda: prepare(session, changes), "flags")

        editor = FlagEditorScreen(session.profile, running or {}, planner, history=hints(None))
        self.push_screen(editor, callback=self._flags_confirmed)
        self.run_worker(
            self._read_last_good(name, editor, hints), group=f"editor:{name}", exit_on_error=False
        )

    async def _read_last_good(
        self,
        name: str,
        editor: FlagEditorScreen,
        hints: Callable[[HistoryEntry | None], dict[str, str]],
    ) -> None:
        """The editor's per-flag history from the host's last good configuration: the answer
        `specops flags` and `specops rollback` read (the editor opens before it arrives)."""
        session = self.fleet.sessions[name]
        unit = session.profile.service.unit
        try:
            entries = await self.on_hosts([name], lambda: history.load(session, unit), "flags")
        except (history.HistoryError, RemoteError) as exc:
            log.warning("%s: history unreadable, the editor shows no last good: %s", name, exc)
            return
        good = history.last_good(entries)
        if good is not None and editor.is_attached:
            editor.show_history(hints(good))

    def _changing(self, name: str) -> bool:
        """A change of this console runs on `name` (its own, or a probation rollback)."""
        if name in self.probation.rolling or name in self._in_group_rollout:
            return True
        mine = (rollout_group(name), campaign_group(name))  # a campaign's cells are changes
        return any(w.group in mine and not w.is_finished for w in self.workers)

    def _flags_confirmed(
        self, plan: Plan | GroupPlan | None, action: ChangeAction = ChangeAction.SET
    ) -> None:
        if not isinstance(plan, Plan):
            return
        self._show_rollout(plan, action)
        self._start_rollout(plan, action)

    def _show_rollout(self, plan: Plan, action: ChangeAction) -> None:
        screen = RolloutScreen(plan, kind=action.kind)
        self._rollout_screens[plan.host] = screen
        self.push_screen(screen)

    # --- history and rollback (the same diff, confirm and rollout as a flag change) -------

    def _rollback_refused(self, name: str, what: str = "rollbacks") -> str | None:
        """Why `name` may not start a change now (`what`: "rollbacks", "campaigns"), or None."""
        if self.read_only:
            return f"read-only: {what} are disabled"
        if self._changing(name):
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
            self._flags_confirmed(plan, ChangeAction.ROLLBACK)

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

    def _start_rollout(self, plan: Plan, action: ChangeAction) -> None:
        """Run a change on the engine as an app worker: it outlives its screen."""
        host = plan.host

        async def run() -> None:
            self.engine.call(self.own_change, host, True)
            try:
                async with self.holding([host], action.value):  # opened first if it was idle
                    session = self.fleet.sessions[host]
                    running = change(
                        session, plan, action=action, on_event=self._rollout_posted, source="tui"
                    )
                    outcome = await self.engine.run(running)
            except Exception as exc:  # a bug must reach the operator, never vanish
                log.exception("%s: rollout crashed", host)
                self.notify(f"{host}: rollout stopped: {exc}", severity="error", markup=False)
                return
            finally:
                self.engine.call(self.own_change, host, False)
            self._changed(outcome)
            self.engine.call(self.probation.reread, host)  # a kept change starts a probation

        self.run_worker(
            run(),
            group=rollout_group(host),
            exit_on_error=False,
            description=f"{host}: {plan.summary()}",
        )

    def _changed(self, outcome: ChangeOutcome) -> None:
        """A change of this console ended (the operator's or probation's): say how."""
        title = "flag change" if outcome.action is ChangeAction.SET else "rollback"
        self.notify(
            outcome_text(outcome.result),
            title=title,
            severity=OUTCOME_SEVERITY[outcome.result.outcome],
            timeout=NOTIFY_TIMEOUT_S,
            markup=False,
        )
        if outcome.not_recorded is not None:
            self.notify(
                f"{outcome.host}: experiment not recorded on the host: {outcome.not_recorded}",
                severity="warning",
                markup=False,
            )
        self.engine.call(self.fleet.refresh_status, outcome.host)

    def _rollout_posted(self, event: RolloutEvent) -> None:  # on the engine's thread
        self.post_message(RolloutUpdated(event))

    # --- probation -----------------------------------------------------------------------

    def _probation_posted(self, event: ProbationEvent) -> None:  # on the engine's thread
        if isinstance(event, ProbationRolling):
            self.own_change(event.host, True)
        elif isinstance(event, ProbationDone) and event.outcome is not None:
            self.own_change(event.host, False)
        self.post_message(ProbationUpdated(event))

    @on(ProbationUpdated)
    def _probation_event(self, message: ProbationUpdated) -> None:
        event = message.event
        if isinstance(event, CampaignSeen):
            if table := self.main(HostTable):
                table.set_campaign(event.host, event.campaign)
            return
        if isinstance(event, ProbationRolling):
            self._show_rollout(event.plan, ChangeAction.PROBATION_ROLLBACK)
        elif isinstance(event, ProbationDone) and event.outcome is not None:
            self._changed(event.outcome)
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
