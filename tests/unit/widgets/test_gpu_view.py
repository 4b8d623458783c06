"""`u`'s lines: each GPU with absolute bars of its history; a GPU gone from the newest read
stays listed, in red; what holds the clocks down in yellow."""

from __future__ import annotations

from console.watch.gpu_reader import GpuReading
from console.watch.gpus import GpuState
from widgets.gpu_view import bars, gpu_lines


def gpu(index: int, used: float, util: float, events: tuple[str, ...] = ()) -> GpuState:
    return GpuState(index, "NVIDIA H100 80GB HBM3", f"GPU-{index}", used, 81920, util, 51, 688, 700,
                    1410, events, 0)  # fmt: skip


def test_bars_are_absolute_and_an_unknown_share_is_blank() -> None:
    assert bars([0.0, 0.5, 1.0, None, 2.0]) == "▁▅█ █"


def test_a_gpu_missing_from_the_newest_read_stays_listed_in_red() -> None:
    both = GpuReading("b300", 1.0, (gpu(0, 40960, 50), gpu(1, 81920, 100, ("sw_power_cap",))))
    one = GpuReading("b300", 2.0, (gpu(0, 81920, 100),))
    text = gpu_lines([both, one])
    header, first, second = text.plain.splitlines()
    assert header.split()[:3] == ["gpu", "memory", "util"]
    assert " ".join(first.split()) == "0 80.0/80 GiB ▅█ 100% ▅█ 51°C 688/700 W 1410 MHz - 0"
    assert second.split() == ["1", "not", "in", "the", "last", "read", "█", "█"]  # its history
    red = [text.plain[s.start : s.end] for s in text.spans if s.style == "bold red"]
    assert red == ["not in the last read"]
    held = gpu_lines([both])
    yellow = [held.plain[s.start : s.end] for s in held.spans if s.style == "yellow"]
    assert yellow == ["sw_power_cap"]
    nothing = GpuReading("mi355", 3.0, problem="no GPU tool: sh: 1: nvidia-smi: not found")
    assert gpu_lines([nothing]).plain == "no GPU tool: sh: 1: nvidia-smi: not found"
