"""The campaign form's windows: a number of seconds, finite, named with its field when not."""

from __future__ import annotations

import pytest

from widgets.campaign_setup import seconds


@pytest.mark.parametrize("text", ["1e999", "nan", "-1", "ten", ""])
def test_a_window_that_is_no_usable_number_is_refused_by_name(text: str) -> None:
    with pytest.raises(ValueError, match=f"measure {text!r}"):
        seconds(text, "measure", allow_zero=False)


def test_zero_is_a_soak_but_not_a_measurement_window() -> None:
    assert seconds("0", "soak", allow_zero=True) == 0.0
    assert seconds("2.5", "measure", allow_zero=False) == 2.5
    with pytest.raises(ValueError, match="more than 0"):
        seconds("0", "measure", allow_zero=False)
