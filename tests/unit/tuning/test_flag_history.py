"""Per-flag history: the last good value, and values that crashed where they differed from it."""

from __future__ import annotations

from console.tuning.flag_history import flag_history

GOOD = {"budget": 8, "cuda_graph": True, "topk": 4}


def test_crashed_values_are_the_ones_that_differed_from_the_last_good() -> None:
    runs = [{"budget": 16, "cuda_graph": True, "topk": 4}, {"budget": 32, "cuda_graph": True}]
    history = flag_history(["budget", "cuda_graph", "topk", "nvls"], GOOD, runs)
    assert history == {
        "budget": "good 8 · crashed 16, 32",
        "cuda_graph": "good on",
        "topk": "good 4",
        "nvls": "",
    }


def test_without_a_last_good_every_value_of_a_crashed_run_is_listed() -> None:
    history = flag_history(["budget", "cuda_graph"], None, [{"budget": 16, "cuda_graph": True}])
    assert history == {"budget": "crashed 16", "cuda_graph": "crashed on"}


def test_the_running_values_can_be_the_baseline_without_being_called_good() -> None:
    running = {"budget": 8, "cuda_graph": True}
    crashed = [{"budget": 16, "cuda_graph": True}]
    history = flag_history(["budget", "cuda_graph"], running, crashed, good=False)
    assert history == {"budget": "crashed 16", "cuda_graph": ""}
