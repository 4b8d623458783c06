"""The kernel's log as `journalctl --dmesg -o json` gives it, read for the driver's Xids: the
real H200 line (driver 580.159.04, tests/fixtures/gpu) on the GPU nvidia-smi lists at its PCI
address, other kernel lines and odd entries left alone, the cursor to read on from."""

from __future__ import annotations

import json
from pathlib import Path

from console.watch.gpus import GpuState, gpu_at, pci_key
from console.watch.xid_reader import parse_kernel_log

FIXTURES = Path(__file__).parents[2] / "fixtures" / "gpu"


def _real_xid_line() -> str:
    text = (FIXTURES / "h200-driver-580.159.04-xid31.txt").read_text()
    line = next(line for line in text.splitlines() if "NVRM: Xid" in line)
    return line.split("] ", 1)[1]  # dmesg's `[   28.651010] ` is not in the journal's MESSAGE


def _entry(cursor: str, at_s: float, message: object) -> str:
    fields = {"__CURSOR": cursor, "__REALTIME_TIMESTAMP": str(int(at_s * 1e6))}
    return json.dumps({**fields, "MESSAGE": message})


def test_the_real_xid_is_read_on_the_gpu_at_its_address() -> None:
    gpus = [
        GpuState(i, "NVIDIA H200", f"GPU-{i}", pci=f"00000000:00:{6 + i:02X}.0") for i in range(2)
    ]
    lines = [
        _entry(
            "s=1", 100.0, "NVRM: GPU at PCI:0000:00:06: GPU-42ab6608-9901-109d-3f03-0de531407272"
        ),
        _entry("s=2", 101.5, _real_xid_line()),
        _entry("s=3", 102.0, [78, 86, 82, 77]),  # a binary MESSAGE: journald's byte array
        "not json",
    ]
    (seen,), cursor = parse_kernel_log("h200", lines, gpus)
    assert cursor == "s=3"
    assert (seen.host, seen.time, seen.gpu) == ("h200", 101.5, 0)
    assert (seen.xid.code, seen.xid.pid, seen.xid.process) == (31, 477, "python3")
    assert seen.text().startswith("Xid 31 on GPU 0 at ")
    assert seen.text().endswith(
        "(python3, pid 477): GPU memory page fault: a kernel's illegal memory access"
    )
    assert seen.near(101.5 + 30) and seen.near(101.5 - 30) and not seen.near(101.5 + 31)
    (unmapped,), _ = parse_kernel_log("h200", lines)  # GPUs not read: named by its address
    assert unmapped.gpu is None and " on PCI 0000:00:06 at " in unmapped.text()
    assert parse_kernel_log("h200", []) == ([], None)


def test_both_spellings_of_a_pci_address_name_one_gpu() -> None:
    assert pci_key("00000000:00:06.0") == pci_key("0000:00:06") == (0, 0, 6)
    assert pci_key("0000:1a:00") == (0, 0x1A, 0) and pci_key("garbage") is None
    gpus = [GpuState(3, "x", "u", pci="00000000:1A:00.0")]
    assert gpu_at("0000:1a:00", gpus) == 3 and gpu_at("0000:1b:00", gpus) is None
