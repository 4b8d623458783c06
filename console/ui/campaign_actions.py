"""Tuning campaigns from the TUI (`C`): set one up on the selected host, run it on the engine
through the same sweep as `specops sweep` (console/tuning/sweep.py: every cell a verified
change, then measured), and watch the grid fill in on its screen.

A campaign runs as an app worker that outlives its screen: escape closes the screen, `C`
on the same host opens it again. While it runs, the host takes no other change from this
console (the flag editor and rollbacks say so), and quitting asks twice, as for any change.
"""

from __future__ import annotations

import logging
import os

from textual import on
from textual.actions import SkipAction
from textual.widgets import Input

from console.hosts.events import RolloutEvent
from console.hosts.profiles import FlagValue
from console.ledger.campaigns import Campaign, CampaignError
from console.transport.ssh import Disconnected, RemoteError
from console.tuning.campaign_start import CampaignOptions, new_on_host, ready_to_run
from console.tuning.history import HistoryError
from console.tuning.sweep import LinkLost, Sweep, SweepEvent
from console.ui.rollout_actions import RolloutActions
from widgets.campaign_setup import CampaignSetupScreen
from widgets.campaign_view import CampaignScreen, CampaignUpdated, campaign_group

log = logging.getLogger(__name__)


class CampaignActions(RolloutActions):
    """`C`: a campaign's setup, its run on the engine, and its screen."""

    _sweeps: dict[str, Sweep]
    """The campaigns this console runs, by host (kept after they end, for their screen)."""
    _campaign_screens: dict[str, CampaignScreen]

    async def action_campaign(self) -> None:
        # A priority key (see app.py): on another screen or in a text field it is a letter.
        if len(self.screen_stack) > 1 or isinstance(self.focused, Input):
            raise SkipAction()
        name = self.selected_host
        if name is None:
            return
        sweep = self._sweeps.get(name)
        if sweep is not None and self._campaign_running(name):
            self._open_campaign(name)
            return
        refused = self._campaign_refused(name)
        if refused is not None:
            self.notify(refused, title="campaign", severity="warning", markup=False)
            return
        session = self.fleet.sessions[name]

        async def planner(
            grid: dict[str, list[FlagValue]], options: CampaignOptions
        ) -> tuple[Campaign, float]:
            async def prepare() -> tuple[Campaign, float]:
                campaign = await new_on_host(session, grid, options)
                return campaign, await ready_to_run(session, campaign)

            return await self.on_hosts([name], prepare, "campaign")

        # Awaited: keys typed right after `C` (one burst from tmux) reach the form, not the
        # journal behind it.
        await self.push_screen(
            CampaignSetupScreen(session.profile, planner), self._campaign_confirmed
        )

    def _campaign_running(self, name: str) -> bool:
        return any(w.group == campaign_group(name) and not w.is_finished for w in self.workers)

    def _campaign_refused(self, name: str) -> str | None:
        return self._rollback_refused(name, "campaigns")

    def _campaign_confirmed(self, prepared: tuple[Campaign, float] | None) -> None:
        if prepared is None:
            return
        campaign, per_cell = prepared
        refused = self._campaign_refused(campaign.host)
        if refused is not None:  # a change started meanwhile, from another screen
            self.notify(refused, title="campaign", severity="warning", markup=False)
            return
        host = campaign.host
        campaign.owner_pid = os.getpid()
        session = self.fleet.sessions[host]

        def posted(event: SweepEvent | RolloutEvent) -> None:  # on the engine's thread
            self.post_message(CampaignUpdated(host, event))

        sweep = Sweep(session, campaign, on_event=posted, on_rollout=posted)
        self._sweeps[host] = sweep
        self._campaign_screens[host] = self._campaign_screen(host, sweep, per_cell)
        self.push_screen(self._campaign_screens[host])
        self.run_worker(
            self._run_campaign(host, sweep),
            group=campaign_group(host),
            exit_on_error=False,
            description=f"{host}: campaign {campaign.id}",
        )

    def _campaign_screen(self, host: str, sweep: Sweep, per_cell: float) -> CampaignScreen:
        def live_accept() -> float | None:  # the running invocation's, none while it starts
            run = self.fleet.monitors[host].summary("accept_len").invocation
            return run.last if run is not None else None

        return CampaignScreen(
            sweep.campaign,
            per_cell,
            live_accept=live_accept,
            stop=lambda: self.engine.call(sweep.stop),
        )

    def _open_campaign(self, host: str) -> None:
        """The running campaign's screen again: a new one, drawn from the campaign's record."""
        old = self._campaign_screens[host]
        screen = self._campaign_screen(host, self._sweeps[host], old.per_cell)
        screen.phase, screen.step, screen.stopping = old.phase, old.step, old.stopping
        self._campaign_screens[host] = screen
        self.push_screen(screen)

    async def _run_campaign(self, host: str, sweep: Sweep) -> None:
        self.engine.call(self.own_change, host, True)  # its cells' restarts too
        try:
            async with self.holding([host], "campaign"):  # opened first if it was idle
                ended = await self.engine.run(sweep.run())
        except (LinkLost, Disconnected) as exc:
            self._campaign_stopped(host, f"the link was lost: {exc}; `specops sweep {host} "
                                   f"--resume {sweep.campaign.id}` goes on from there")  # fmt: skip
            return
        except (CampaignError, HistoryError, RemoteError) as exc:
            self._campaign_stopped(host, str(exc))
            return
        except Exception as exc:  # a bug must reach the operator, never vanish
            log.exception("%s: campaign crashed", host)
            self._campaign_stopped(host, f"stopped: {exc}")
            return
        finally:
            self.engine.call(self.own_change, host, False)
            self.engine.call(self.fleet.refresh_status, host)
        self.notify(
            f"{host}: campaign {ended.id} {ended.state}: {ended.end}",
            title="campaign",
            severity="information" if ended.state == "finished" else "warning",
            markup=False,
        )
        self.engine.call(self.probation.reread, host)

    def _campaign_stopped(self, host: str, message: str) -> None:
        self.notify(f"{host}: campaign: {message}", title="campaign", severity="error",
                    markup=False)  # fmt: skip
        screen = self._campaign_screens.get(host)
        if screen is not None:
            screen.failed(message)

    @on(CampaignUpdated)
    def _campaign_event(self, message: CampaignUpdated) -> None:
        screen = self._campaign_screens.get(message.host)
        if screen is not None:
            screen.show(message.event)
