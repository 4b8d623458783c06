"""A campaign's record (console/ledger/campaigns.py): it round-trips, a foreign or hostile
one is refused, and a running one is the host's lock until it goes stale."""

from __future__ import annotations

import time

import pytest

from console.ledger import campaigns
from console.ledger.campaigns import Campaign, Cell
from console.transport.host_files import STATE_ROOT


def test_the_record_round_trips_and_a_foreign_one_is_refused() -> None:
    campaign = Campaign(
        id=campaigns.new_id(1_800_000_000),
        host="b300",
        unit="sglang-k26-ddtree.service",
        grid={"budget": [4, 8]},
        start={"budget": 8},
        cells=[Cell(values={"budget": 4}, outcome="measured", tok_s=1650.0), Cell({"budget": 8})],
    )
    again = Campaign.from_record(campaign.record())
    assert again == campaign and again.done == 1 and again.best() == campaign.cells[0]
    with pytest.raises(ValueError):
        Campaign.from_record({**campaign.record(), "format": "x"})
    with pytest.raises(ValueError):
        Campaign.from_record({**campaign.record(), "id": "../../etc/passwd"})
    with pytest.raises(campaigns.CampaignError):
        campaigns.campaign_path("u.service", "../x", STATE_ROOT)


def test_a_running_campaign_holds_the_host_until_its_record_goes_stale() -> None:
    now = time.time()
    held = Campaign(
        id=campaigns.new_id(now), host="b300", unit="u.service", grid={}, start={},
        updated_at=now - 60,
    )  # fmt: skip
    assert campaigns.holder([held], now) is held
    assert campaigns.holder([held], now, mine=held.id) is None
    assert campaigns.holder([held], now + campaigns.STALE_LOCK_S) is None
    held.state = "finished"
    assert campaigns.holder([held], now) is None
