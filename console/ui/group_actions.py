"""One change to several hosts from the TUI: marks in the fleet table (`space` marks the
selected host, `M` every host shown — a filter such as `F group=b300` picks a group), then
`f` edits the marked hosts' flags together.

The plan is the CLI's (console/tuning/group_plan.py: refusals for a bad value, a flag a
host's build lacks, different releases or GPUs; hosts already on it skipped; a canary, then
waves of a quarter), reviewed as one diff per set of alike hosts, then run on the engine
through console/tuning/group.py as one app worker: the canary alone through its soak, then
each wave, stopping at the first host that does not end healthy. Its screen shows a row per
host and the waves; the summary also comes as a notification.
"""

from __future__ import annotations

import logging

from textual import on

from console.hosts.events import ChangeAction, RolloutEvent
from console.hosts.profiles import FlagValue
from console.tuning import group
from console.tuning.group_plan import GroupPlan, counted, plan_group
from console.tuning.plan import Plan, prepare
from console.ui.rollout_actions import RolloutActions
from widgets.flag_editor import FlagEditorScreen
from widgets.group_rollout_view import (
    GroupRolloutScreen,
    GroupUpdated,
    group_worker,
)
from widgets.host_table import HostTable
from widgets.rollout_view import RolloutUpdated

log = logging.getLogger(__name__)


class GroupActions(RolloutActions):
    """Marks, the flag editor over the marked hosts, and the group rollout's screen."""

    _group_screens: dict[str, GroupRolloutScreen]
    """The screen of each group rollout this console runs, by rollout id."""

    def action_toggle_mark(self) -> None:
        table = self.main(HostTable)
        name = self.selected_host
        if table is None or name is None or len(self.screen_stack) > 1:
            return
        table.toggle_mark(name)
        self._say_marks(table.marked)

    def action_mark_shown(self) -> None:
        table = self.main(HostTable)
        if table is None or len(self.screen_stack) > 1:
            return
        self._say_marks(table.mark_shown())

    def _say_marks(self, marked: list[str]) -> None:
        text = (
            f"{len(marked)} marked: `f` changes them together"
            if marked
            else "no host marked: `f` changes the selected host"
        )
        self.notify(text, title="marks", timeout=3, markup=False)

    def action_edit_flags(self) -> None:
        table = self.main(HostTable)
        marked = table.marked if table is not None else []
        if not marked:
            super().action_edit_flags()
            return
        if self.read_only:
            self.notify("read-only: flag changes are disabled", title="flags", severity="warning")
            return
        if len(self.screen_stack) > 1:
            return
        busy = [h for h in marked if self._changing(h)]
        if busy:
            text = f"{', '.join(busy)}: a flag change is already running"
            self.notify(text, title="flags", severity="warning", markup=False)
            return
        first = self.fleet.sessions[marked[0]].profile
        status = self.fleet.status.get(marked[0])
        running = status.flags if status else {}

        async def planner(changes: dict[str, FlagValue]) -> GroupPlan:
            sessions = {h: self.fleet.sessions[h] for h in marked}

            async def plan() -> GroupPlan:
                return await plan_group(sessions, marked, lambda session: prepare(session, changes))

            return await self.on_hosts(marked, plan, "flags")

        title = f"{counted(len(marked), 'marked host')}: {', '.join(marked)}"
        editor = FlagEditorScreen(first, running or {}, planner, title=title)
        self.push_screen(editor, callback=self._group_confirmed)

    def _group_confirmed(self, planned: Plan | GroupPlan | None) -> None:
        if not isinstance(planned, GroupPlan):
            return
        busy = [p.host for p in planned.todo if self._changing(p.host)]
        if busy:  # a change started meanwhile (probation, another screen)
            text = f"{', '.join(busy)}: a flag change is already running; nothing was changed"
            self.notify(text, title="flags", severity="warning", markup=False)
            return
        rollout = group.new_rollout_id()
        screen = GroupRolloutScreen(planned, rollout)
        self._group_screens[rollout] = screen
        self.push_screen(screen)
        self._start_group(planned, rollout)

    def _start_group(self, planned: GroupPlan, rollout: str) -> None:
        hosts = [p.host for p in planned.todo]

        def wave_posted(event: group.GroupEvent) -> None:  # on the engine's thread
            self.post_message(GroupUpdated(rollout, event))

        async def run() -> None:
            self._in_group_rollout.update(hosts)
            for host in hosts:
                self.engine.call(self.own_change, host, True)
            try:
                async with self.holding(hosts, ChangeAction.GROUP_SET.value):
                    sessions = {h: self.fleet.sessions[h] for h in hosts}
                    running = group.group_change(
                        sessions,
                        planned.waves,
                        rollout=rollout,
                        on_event=self._group_rollout_posted,
                        on_wave=wave_posted,
                    )
                    ended = await self.engine.run(running)
            except Exception as exc:  # a bug must reach the operator, never vanish
                log.exception("rollout %s crashed", rollout)
                self.notify(f"rollout {rollout} stopped: {exc}", severity="error", markup=False)
                return
            finally:
                self._in_group_rollout.difference_update(hosts)
                for host in hosts:
                    self.engine.call(self.own_change, host, False)
            self.post_message(GroupUpdated(rollout, ended))
            for outcome in [*ended.outcomes, *ended.undone]:
                self.engine.call(self.fleet.refresh_status, outcome.host)
                self.engine.call(self.probation.reread, outcome.host)

        self.run_worker(
            run(),
            group=group_worker(rollout),
            exit_on_error=False,
            description=f"rollout {rollout}: {len(hosts)} hosts",
        )

    def _group_rollout_posted(self, event: RolloutEvent) -> None:  # on the engine's thread
        self.post_message(RolloutUpdated(event))

    @on(RolloutUpdated)
    def _group_host_event(self, message: RolloutUpdated) -> None:
        for screen in self._group_screens.values():
            if screen.is_attached and screen.outcome is None:
                screen.show(message.event)

    @on(GroupUpdated)
    def _group_event(self, message: GroupUpdated) -> None:
        event = message.event
        screen = self._group_screens.get(message.rollout)
        if screen is not None and screen.is_attached:
            screen.show_group(event)
        if isinstance(event, group.GroupOutcome):
            lines = [line for line, _ in event.summary()]
            self.notify(
                "\n".join(lines),
                title=f"rollout {event.rollout}",
                severity="information" if event.ok else "warning",
                markup=False,
            )
