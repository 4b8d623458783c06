"""nvidia-smi's real output (H100 80GB HBM3, driver 580.159.04; tests/fixtures/gpu) read by
the header it carries: units in cells or not, `clocks_event_reasons` for the field asked as
`clocks_throttle_reasons`, `[N/A]` and `[Not Supported]` as no value, the event mask by name."""

from __future__ import annotations

from pathlib import Path

import pytest

from console.watch.gpus import (
    QUERY,
    GpuQueryError,
    GpuState,
    clock_events,
    compact,
    gpus_of,
    parse_gpus,
    summary,
)

FIXTURES = Path(__file__).parents[2] / "fixtures" / "gpu"


def test_the_idle_h100_with_units_in_every_cell() -> None:
    (gpu,) = parse_gpus((FIXTURES / "h100-driver-580.159.04-idle.csv").read_text())
    assert (gpu.index, gpu.name) == (0, "NVIDIA H100 80GB HBM3")
    assert gpu.uuid == "GPU-8773e22d-9771-f93a-b202-0adbc0199299"
    assert (gpu.memory_used_mib, gpu.memory_total_mib) == (0, 81559)
    assert (gpu.util_pct, gpu.temp_c) == (0, 34)
    assert (gpu.power_w, gpu.power_limit_w, gpu.sm_clock_mhz) == (74.87, 700.0, 345)
    assert gpu.clock_events == ("gpu_idle",) and gpu.slowed == ()
    assert gpu.ecc_uncorrected == 0


def test_under_load_at_its_power_cap_with_and_without_units() -> None:
    """100 %, 688 W of 700 W: reason 0x4, the SW power cap, a card that is slowed."""
    (with_units,) = parse_gpus((FIXTURES / "h100-driver-580.159.04-under-load.csv").read_text())
    header = (FIXTURES / "h100-driver-580.159.04-under-load.csv").read_text().splitlines()[0]
    row = (FIXTURES / "h100-driver-580.159.04-under-load-noheader-nounits.csv").read_text()
    (bare,) = parse_gpus(header + "\n" + row)  # `csv,nounits`: the header, bare numbers
    for gpu in (with_units, bare):
        assert (gpu.memory_used_mib, gpu.memory_total_mib, gpu.util_pct) == (20049, 81559, 100)
        assert gpu.clock_events == ("sw_power_cap",) and gpu.slowed == ("sw_power_cap",)
        assert gpu.power_limit_w is None  # not asked in that capture: no column, no value
    assert (with_units.power_w, with_units.sm_clock_mhz) == (688.11, 1410)
    assert (bare.power_w, bare.sm_clock_mhz) == (695.58, 1395)


def test_missing_values_and_several_gpus() -> None:
    text = (
        "index, name, uuid, memory.used [MiB], memory.total [MiB], utilization.gpu [%], "
        "temperature.gpu, power.draw [W], power.limit [W], clocks.sm [MHz], "
        "clocks_throttle_reasons.active, ecc.errors.uncorrected.volatile.total\n"
        "0, NVIDIA B300, GPU-a, 170000, 180000, 97, 71, [N/A], [N/A], 1800, 0x0000000000000044, "
        "[Not Supported]\n"
        "1, NVIDIA B300, GPU-b, 12, 180000, 0, 30, 90.5, 1100.00, 300, 0x0000000000000001, 2\n"
    )
    first, second = parse_gpus(text)
    assert first.power_w is None and first.power_limit_w is None and first.ecc_uncorrected is None
    assert first.clock_events == ("sw_power_cap", "hw_thermal_slowdown")
    assert second.record() == {
        "index": 1,
        "name": "NVIDIA B300",
        "memory_used_mib": 12,
        "memory_total_mib": 180000,
        "util_pct": 0,
        "temp_c": 30,
        "power_w": 90.5,
        "power_limit_w": 1100.0,
        "sm_clock_mhz": 300,
        "clock_events": ["gpu_idle"],
        "ecc_uncorrected": 2,
        "pci": "",  # not asked in that query: no address
    }


def test_bits_nvml_does_not_name_and_output_that_is_not_the_csv() -> None:
    assert clock_events("0x0000000000001004") == ("sw_power_cap", "0x1000")
    assert clock_events("[N/A]") == () and clock_events(None) == ()
    assert parse_gpus("") == []
    with pytest.raises(GpuQueryError, match="not nvidia-smi's CSV"):
        parse_gpus("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver")
    with pytest.raises(GpuQueryError, match="fields under"):
        parse_gpus("index, uuid, memory.used [MiB]\n0, GPU-a\n")
    assert QUERY[1].startswith("--query-gpu=index,name,uuid,pci.bus_id,memory.used,memory.total,")
    assert QUERY[2] == "--format=csv,nounits"


def test_the_real_xid_31_line_and_one_without_a_pid() -> None:
    """Driver 580.159.04 on an H200, an illegal memory access provoked on purpose."""
    from console.watch.xid import parse_xid

    lines = (FIXTURES / "h200-driver-580.159.04-xid31.txt").read_text().splitlines()
    found = [x for x in map(parse_xid, lines) if x is not None]
    (xid,) = found  # the "GPU at PCI" line beside it and the traceback are no Xid
    assert (xid.code, xid.pci, xid.pid, xid.process) == (31, "0000:00:06", 477, "python3")
    assert "MMU Fault" in xid.detail and not xid.hardware
    assert xid.text() == (
        "Xid 31 on PCI 0000:00:06 (python3, pid 477): "
        "GPU memory page fault: a kernel's illegal memory access"
    )
    bus = parse_xid("[ 9.1] NVRM: Xid (PCI:0000:1b:00): 79, GPU has fallen off the bus.")
    assert bus is not None and bus.pid is None and bus.process is None and bus.hardware
    assert bus.text().startswith("Xid 79 on PCI 0000:1b:00: the GPU has fallen off the bus")


def _loaded(index: int, used: float, util: float, events: tuple[str, ...] = ()) -> GpuState:
    return GpuState(
        index, "NVIDIA H100 80GB HBM3", f"GPU-{index}", used, 81559, util, clock_events=events
    )


def test_the_fleet_cell_and_status_line_name_the_fullest_gpu_and_any_slowdown() -> None:
    gpus = [_loaded(0, 20049, 100, ("sw_power_cap",)), _loaded(1, 72000, 90), _loaded(2, 0, 80)]
    assert compact(gpus) == "70/80G 90%↓"
    assert summary(gpus) == "3 GPUs, fullest 70/80 GiB, util 90%; sw_power_cap on 0"
    assert compact([_loaded(0, 0, 0, ("gpu_idle",))]) == "0/80G 0%"  # idle is no slowdown
    assert summary([_loaded(0, 0, 0)]) == "1 GPU, 0/80 GiB, util 0%"
    assert compact([]) == "" and summary([]) == "no GPUs"
    capped = [
        _loaded(i, 100, 100, ("sw_power_cap",) if i in (0, 1, 2, 3, 6) else ()) for i in range(8)
    ]
    assert summary(capped).endswith("sw_power_cap on 0-3, 6")
    assert summary([_loaded(i, 1, 1, ("hw_slowdown",)) for i in range(4)]).endswith("on all")
    ecc = GpuState(0, "x", "u", ecc_uncorrected=2)
    assert summary([ecc]) == "1 GPU; 2 uncorrected ECC errors"  # no memory, no util: not invented


def test_a_status_record_reads_back_as_the_same_gpus() -> None:
    (gpu,) = parse_gpus((FIXTURES / "h100-driver-580.159.04-idle.csv").read_text())
    (again,) = gpus_of({"gpus": [gpu.record()]})
    assert again.record() == gpu.record()
    assert gpus_of({}) == []
