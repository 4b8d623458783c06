"""Before a campaign runs: made from what the host runs now, its host known free of another
console's campaign, and one cell's duration estimated from the host's history. The CLI
(`specops sweep`) and the TUI's campaign screen start campaigns through here.
"""

from __future__ import annotations

from dataclasses import dataclass

from console.hosts.profiles import FlagValue
from console.ledger import campaigns
from console.ledger.campaigns import Campaign, CampaignError
from console.service.status import read_status
from console.transport.ssh import HostSession
from console.tuning import bench_step, history
from console.tuning import campaign as grids
from console.tuning.sweep import new_campaign


@dataclass(frozen=True)
class CampaignOptions:
    """How each cell runs: soak (None: the profile's), measurement window, end state."""

    soak_s: float | None = None
    measure_s: float = 60.0
    keep: str = "original"
    """"original" (the configuration it started on) or "best" (the fastest cell)."""
    prune: bool = True
    bench: list[str] | None = None
    bench_timeout_s: float = bench_step.BENCH_TIMEOUT_S


async def new_on_host(
    session: HostSession, grid: dict[str, list[FlagValue]], options: CampaignOptions
) -> Campaign:
    """A new campaign over `grid`, starting from the flags the host runs now (its secrets
    left out: they are never written into the record)."""
    status = await read_status(session)
    secret = session.profile.secret_names
    start = {k: v for k, v in status.flags.items() if k not in secret}
    return new_campaign(
        session,
        grid,
        start,
        soak_s=options.soak_s,
        measure_s=options.measure_s,
        keep=options.keep,
        prune=options.prune,
        bench=options.bench,
        bench_timeout_s=options.bench_timeout_s,
    )


async def ready_to_run(session: HostSession, campaign: Campaign) -> float:
    """One cell's estimated seconds on this host, once no other live campaign holds it
    (CampaignError naming the holder when one does)."""
    unit = session.profile.service.unit
    now = session.clock.time()
    held = campaigns.holder(await campaigns.load_all(session, unit), now, mine=campaign.id)
    if held is not None:
        raise CampaignError(
            f"campaign {held.id} of {held.owner or '?'} owns this host (running, its record "
            f"rewritten {now - held.updated_at:.0f}s ago); it counts as abandoned "
            f"{campaigns.STALE_LOCK_S:.0f}s after its last write"
        )
    entries = await history.load(session, unit)
    soak_s = session.profile.service.soak_s if campaign.soak_s is None else campaign.soak_s
    return grids.cell_seconds(entries, soak_s, campaign.measure_s)


def remaining_s(campaign: Campaign, per_cell: float) -> float:
    """The time left: the cells still pending, and the baseline's window if it is not done."""
    left = sum(1 for c in campaign.cells if c.outcome == "pending")
    return left * per_cell + (campaign.measure_s if campaign.baseline is None else 0.0)
