"""A campaign's grid, pruning and estimate (console/tuning/campaign.py), without a host."""

from __future__ import annotations

import pytest

from console.hosts.profiles import Profile
from console.service.execline import FlagError
from console.tuning import campaign as grids
from console.tuning.history import HistoryEntry


def test_the_grid_is_validated_like_set_and_its_cells_vary_the_last_name_fastest(
    profile: Profile,
) -> None:
    grid = grids.parse_grid(profile, ["budget=4,8,16", "cuda_graph=on,off"])
    assert grid == {"budget": [4, 8, 16], "cuda_graph": [True, False]}
    cells = grids.cells_of(grid)
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
        grids.parse_grid(profile, axes)


def test_a_cell_only_further_along_the_flag_that_crashed_is_beyond_it() -> None:
    crashed = [{"budget": 16, "cuda_graph": True}]
    numeric = ["budget"]
    assert grids.beyond({"budget": 32, "cuda_graph": True}, crashed, numeric) == (
        "budget",
        crashed[0],
    )
    assert grids.beyond({"budget": 32, "cuda_graph": False}, crashed, numeric) is None
    assert grids.beyond({"budget": 8, "cuda_graph": True}, crashed, numeric) is None
    assert grids.beyond({"budget": 16, "cuda_graph": False}, crashed, numeric) is None


def test_a_cell_takes_the_hosts_usual_change_plus_the_window() -> None:
    def entry(n: int, took: float, outcome: str = "kept") -> HistoryEntry:
        return HistoryEntry(
            n=n, kind="change", outcome=outcome, values={}, argv=[], environment={},
            dropin=None, started_at=1000.0, finished_at=1000.0 + took,
        )  # fmt: skip

    assert grids.cell_seconds([], soak_s=60, measure_s=30) == 60 + 60 + 30
    history = [entry(1, 100), entry(2, 200, "rolled_back"), entry(3, 300), entry(4, 5, "failed")]
    assert grids.cell_seconds(history, soak_s=60, measure_s=30) == 200 + 30
