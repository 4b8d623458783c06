"""A host's GPUs as nvidia-smi names them (the reference H100, driver 580.159.04), and when
hosts differ."""

from __future__ import annotations

from console.service.gpu_model import model_of, unlike

H100 = "NVIDIA H100 80GB HBM3"


def test_the_model_counts_each_name_in_index_order() -> None:
    assert model_of([H100] * 8) == f"8× {H100}"
    assert model_of([H100, "NVIDIA H200", H100]) == f"2× {H100} + 1× NVIDIA H200"
    assert model_of([]) is None and model_of([""]) is None


def test_hosts_differ_only_by_what_they_said() -> None:
    eight, four = f"8× {H100}", f"4× {H100}"
    assert unlike({"a": eight, "b": eight}) is None
    assert unlike({"a": eight, "b": None}) is None  # nothing to compare with
    assert unlike({"a": eight, "b": four, "c": None}) == f"a {eight}, b {four}"
