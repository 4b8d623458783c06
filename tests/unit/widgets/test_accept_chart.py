"""How a series becomes bars: buckets, stretching, flat series."""

from __future__ import annotations

from widgets.accept_chart import BARS, bar_levels


def test_more_values_than_columns_keep_each_buckets_peak() -> None:
    values = [1.0, 5.0, 2.0, 2.0, 3.0, 1.0]
    assert bar_levels(values, 3) == [7, 0, 2]  # peaks 5, 2, 3 scaled between 2 and 5


def test_fewer_values_than_columns_stretch_across_the_width() -> None:
    assert bar_levels([1.0, 2.0], 4) == [0, 0, 7, 7]


def test_a_flat_series_draws_full_bars_and_nothing_draws_nothing() -> None:
    assert bar_levels([4.8, 4.8, 4.8], 5) == [len(BARS) - 1] * 5
    assert bar_levels([], 5) == []
    assert bar_levels([4.8], 0) == []
