"""The simulated host's nvidia-smi answers in the real tool's shape (H100 80GB HBM3, driver
580.159.04; tests/fixtures/gpu): asked the captured query, its header is the captured header
word for word, and its readings follow the server (idle, loading, serving at the power cap)."""

from __future__ import annotations

from pathlib import Path

import pytest

from console.sim.gpus import Load, UnknownField, answer
from console.watch.gpus import QUERY, GpuState, parse_gpus

FIXTURES = Path(__file__).parents[2] / "fixtures" / "gpu"
H100 = "NVIDIA H100 80GB HBM3"
CAPTURED_FIELDS = (
    "index,uuid,name,pci.bus_id,driver_version,memory.total,memory.used,memory.free,"
    "utilization.gpu,utilization.memory,temperature.gpu,power.draw,power.limit,clocks.sm,"
    "clocks.mem,ecc.errors.uncorrected.volatile.total,pstate,clocks_throttle_reasons.active"
)


def test_the_captured_query_comes_back_as_the_real_card_answered_it_idle() -> None:
    real = (FIXTURES / "h100-driver-580.159.04-idle.csv").read_text().splitlines()
    fields = CAPTURED_FIELDS.replace("clocks.mem,", "clocks.current.memory,").split(",")
    ours = answer([H100], fields, "csv", "idle").splitlines()
    assert ours[0] == real[0]
    skip = {1, 3}  # the uuid and the PCI address are the card's own
    for n, (a, b) in enumerate(zip(ours[1].split(", "), real[1].split(", "), strict=True)):
        assert n in skip or a == b, (n, a, b)


def test_serving_holds_the_static_pool_at_the_power_cap_and_idle_is_no_slowdown() -> None:
    fields = QUERY[1].partition("=")[2].split(",")
    fmt = QUERY[2].partition("=")[2]
    idle = parse_gpus(answer([H100] * 2, fields, fmt, "idle"))
    loading = parse_gpus(answer([H100] * 2, fields, fmt, "loading"))
    serving = parse_gpus(answer([H100] * 2, fields, fmt, "serving"))
    assert [g.index for g in serving] == [0, 1]
    assert idle[0].memory_used_mib == 0 and idle[0].clock_events == ("gpu_idle",)
    assert 0 < (loading[0].memory_used_mib or 0) < (serving[0].memory_used_mib or 0)
    assert serving[0].memory_used_mib == int(81559 * 0.88)  # mem_fraction_static, whatever is used
    assert serving[0].util_pct == 100 and serving[0].slowed == ("sw_power_cap",)
    assert (serving[0].power_w or 0) < (serving[0].power_limit_w or 0) == 700.0


def test_the_name_query_and_an_unknown_field() -> None:
    assert answer([H100, "NVIDIA H200"], ["name"], "csv,noheader", "idle") == (
        f"{H100}\nNVIDIA H200\n"
    )
    with pytest.raises(UnknownField, match="nonsense"):
        answer([H100], ["index", "nonsense"], "csv", "idle")


def test_utilization_and_power_follow_the_requests_and_memory_the_static_pool() -> None:
    fields = QUERY[1].partition("=")[2].split(",")
    fmt = QUERY[2].partition("=")[2]

    def one(load: Load) -> GpuState:
        (gpu,) = parse_gpus(answer([H100], fields, fmt, "serving", load))
        return gpu

    light, heavy = one(Load(running=0.25)), one(Load(running=0.9))
    assert (light.util_pct or 0) < (heavy.util_pct or 0) == 100
    assert (light.power_w or 0) < (heavy.power_w or 0) < (heavy.power_limit_w or 0)
    assert light.slowed == () and heavy.slowed == ("sw_power_cap",)  # the cap: heavy only
    assert (light.sm_clock_mhz, heavy.sm_clock_mhz) == (1980, 1410)
    assert light.memory_used_mib == heavy.memory_used_mib  # the pool, whatever is in flight
    assert one(Load(running=0.5, mem_fraction=0.7)).memory_used_mib == int(81559 * 0.7)
