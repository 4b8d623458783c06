"""NVIDIA driver Xid errors, as the kernel logs them: which GPU, which process, what it means.

`NVRM: Xid (PCI:0000:00:06): 31, pid=477, name=python3, channel 0x0000000a, …` (driver
580.159.04; tests/fixtures/gpu): the prefix `NVRM: Xid (PCI:DOMAIN:BUS:DEV): CODE, ` is the
same for every code, what follows differs, and some codes come without a pid. The meaning of
each code an operator of a spec-decoding server meets is kept here in one line (NVIDIA's Xid
catalogue): 13, 31 and 43 are a kernel's fault (the server's illegal memory access), the ECC
codes and 79 (the GPU fell off the bus) are the hardware's, which no configuration change helps.

Pure: text in, records out; no I/O, no Textual.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_XID = re.compile(r"NVRM: Xid \(PCI:(?P<pci>[0-9A-Fa-f:.]+)\): (?P<code>\d+),\s*(?P<rest>.*)$")
_PID = re.compile(r"\bpid=(?P<pid>\d+)")
_NAME = re.compile(r"\bname=(?P<name>[^,\s]+)")

MEANINGS = {
    13: "graphics engine exception: a kernel's fault (an illegal or out-of-range access)",
    31: "GPU memory page fault: a kernel's illegal memory access",
    43: "GPU stopped processing: a kernel's fault in the application",
    45: "preemptive cleanup after an earlier error",
    48: "double-bit ECC error: hardware",
    63: "ECC page retirement or row remapping recorded: hardware",
    64: "ECC page retirement or row remapping failed: hardware",
    74: "NVLink error: hardware or its link",
    79: "the GPU has fallen off the bus: hardware; no configuration change helps",
    94: "contained ECC error: hardware",
    95: "uncontained ECC error: hardware",
}
HARDWARE = frozenset({48, 63, 64, 74, 79, 94, 95})


@dataclass(frozen=True)
class Xid:
    code: int
    pci: str
    """The GPU's PCI address as the driver prints it (`0000:00:06`)."""
    pid: int | None
    process: str | None
    detail: str
    """The rest of the line (channel, fault type, …)."""

    @property
    def meaning(self) -> str:
        return MEANINGS.get(self.code, "see NVIDIA's Xid catalogue")

    @property
    def hardware(self) -> bool:
        return self.code in HARDWARE

    def text(self) -> str:
        """`Xid 31 on PCI 0000:00:06 (python3, pid 477): GPU memory page fault: …`."""
        who = ", ".join(
            part for part in (self.process, None if self.pid is None else f"pid {self.pid}") if part
        )
        return (
            f"Xid {self.code} on PCI {self.pci}"
            + (f" ({who})" if who else "")
            + (f": {self.meaning}")
        )


def parse_xid(line: str) -> Xid | None:
    """The Xid a kernel log line reports; None for any other line."""
    match = _XID.search(line)
    if match is None:
        return None
    rest = match.group("rest")
    pid = _PID.search(rest)
    name = _NAME.search(rest)
    return Xid(
        code=int(match.group("code")),
        pci=match.group("pci"),
        pid=int(pid.group("pid")) if pid else None,
        process=name.group("name") if name else None,
        detail=rest.strip(),
    )
