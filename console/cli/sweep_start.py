"""What a campaign needs before it runs: the grid and bench command validated, the campaign
made (or `--resume ID` read back and checked that its console is gone), the host's lock
known free, and one cell's estimated duration (`specops sweep`, one host or several).
"""

from __future__ import annotations

import argparse
import os
import socket
import time

from console.hosts.profiles import FlagValue, Profile
from console.ledger import campaigns
from console.ledger.campaigns import Campaign, CampaignError
from console.transport.ssh import HostSession
from console.tuning import bench_step
from console.tuning import campaign as grids
from console.tuning.campaign_start import CampaignOptions, new_on_host, ready_to_run


def parse_grid(profile: Profile, args: argparse.Namespace) -> dict[str, list[FlagValue]]:
    """The grid for `profile` and the bench command (`args.bench_argv`), both validated."""
    args.bench_argv = None if args.bench is None else bench_step.bench_argv(args.bench)
    return grids.parse_grid(profile, args.axes)


async def prepare_campaign(
    session: HostSession, args: argparse.Namespace, grid: dict[str, list[FlagValue]]
) -> tuple[Campaign, float]:
    """The campaign to run on the host (new, or `--resume ID`) once its lock is known free,
    and one cell's estimated seconds there."""
    if args.resume is not None:
        campaign = await campaigns.load(session, session.profile.service.unit, args.resume)
        _may_resume(campaign, time.time())
    else:
        options = CampaignOptions(
            soak_s=args.soak,
            measure_s=args.measure,
            keep=args.keep,
            prune=not args.no_prune,
            bench=args.bench_argv,
            bench_timeout_s=args.bench_timeout,
        )
        campaign = await new_on_host(session, grid, options)
    return campaign, await ready_to_run(session, campaign)


def _may_resume(campaign: Campaign, now: float) -> None:
    """A campaign goes on only when no live console runs it: finished ones never, a running
    one when its console is gone (this machine's, not running) or its lock went stale."""
    if campaign.state == "finished":
        raise CampaignError(f"campaign {campaign.id} finished already ({campaign.end})")
    if campaign.state != "running" or campaign.stale(now):
        return
    owner = campaign.owner.rpartition("@")[2]
    pid = campaign.owner_pid
    if owner == socket.gethostname() and pid is not None and not _alive(pid):
        return
    raise CampaignError(
        f"campaign {campaign.id} is running from {campaign.owner or '?'} (pid {pid}); it can be "
        f"resumed once that console has stopped, or {campaigns.STALE_LOCK_S:.0f}s after the "
        "record's last write"
    )


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
