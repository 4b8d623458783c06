"""A campaign's grid, pruning, estimate, record and lock, without a host."""

from __future__ import annotations

import time

import pytest

from console.hosts.profiles import Profile
from console.service.execline import FlagError
from console.tuning import campaign as campaigns
from console.tuning.campaign import Campaign, Cell
from console.tuning.history import HistoryEntry


def test_the_grid_is_validated_like_set_and_its_cells_vary_the_last_name_fastest(
    profile: Profile,
) -> None:
    grid = campaigns.parse_grid(profile, ["budget=4,8,16", "cuda_graph=on,off"])
    assert grid == {"budget": [4, 8, 16], "cuda_graph": [True, False]}
    cells = campaigns.cells_of(grid)
    assert len(cells) == 6
    assert cells[:3] == [
        {"budget": 4, "cuda_graph": True},
        {"budget": 4, "cuda_graph": False},
        {"budget": 8, "cuda_graph": True},
    ]


@pytest.mark.parametrize(
    ("axes", "says"),
    [
        (["budget=4,-1"], "budget"),
        (["bugdet=4,8"], "no such flag"),
        (["budget"], "NAME=V1,V2"),
        (["budget=4,4"], "value given twice"),
        (["budget=4", "budget=8"], "given more than once"),
        ([], "nothing to sweep"),
        (
            [
                "budget=" + ",".join(map(str, range(1, 20))),
                "max_running=" + ",".join(map(str, range(1, 20))),
            ],
            "at most 256",
        ),
    ],
)
def test_a_bad_grid_is_refused_naming_what_is_wrong(
    profile: Profile, axes: list[str], says: str
) -> None:
    with pytest.raises(FlagError, match=says):
        campaigns.parse_grid(profile, axes)


def test_a_cell_only_further_along_the_flag_that_crashed_is_beyond_it() -> None:
    crashed = [{"budget": 16, "cuda_graph": True}]
    numeric = ["budget"]
    assert campaigns.beyond({"budget": 32, "cuda_graph": True}, crashed, numeric) == (
        "budget",
        crashed[0],
    )
    assert campaigns.beyond({"budget": 32, "cuda_graph": False}, crashed, numeric) is None
    assert campaigns.beyond({"budget": 8, "cuda_graph": True}, crashed, numeric) is None
    assert campaigns.beyond({"budget": 16, "cuda_graph": False}, crashed, numeric) is None


def test_a_cell_takes_the_hosts_usual_change_plus_the_window() -> None:
    def entry(n: int, took: float, outcome: str = "kept") -> HistoryEntry:
        return HistoryEntry(
            n=n, kind="change", outcome=outcome, values={}, argv=[], environment={},
            dropin=None, started_at=1000.0, finished_at=1000.0 + took,
        )  # fmt: skip

    assert campaigns.cell_seconds([], soak_s=60, measure_s=30) == 60 + 60 + 30
    history = [entry(1, 100), entry(2, 200, "rolled_back"), entry(3, 300), entry(4, 5, "failed")]
    assert campaigns.cell_seconds(history, soak_s=60, measure_s=30) == 200 + 30


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
        campaigns.campaign_path("u.service", "../x")


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
