"""The NVIDIA driver's Xid errors from a host's kernel log, read through its session.

`journalctl --dmesg -o json` after the last cursor read (the first read: the last ten minutes),
each line parsed by `xid.parse_xid`, the GPU named by its PCI address when the host's GPUs are
known (`NVRM: Xid (PCI:0000:00:06): 31` is the GPU nvidia-smi lists at `00000000:00:06.0`).
A host whose kernel log cannot be read (no permission, no journal) yields nothing: the Xids
are a help beside the crash, never a reason for an error per poll.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from console.transport import remote
from console.transport.ssh import HostSession
from console.watch.gpus import GpuState, gpu_at
from console.watch.xid import Xid, parse_xid

LOOK_BACK_S = 600
"""How far back the first read of a host looks (an Xid minutes before the console started)."""
NEAR_CRASH_S = 30.0
"""An Xid this close to a crash of the same host (before or after) is that crash's."""
READ_TIMEOUT_S = 20.0


@dataclass(frozen=True)
class XidSeen:
    host: str
    time: float
    """When the kernel logged it (the host's clock)."""
    xid: Xid
    gpu: int | None = None
    """The index of the GPU at its PCI address (None: the GPUs were not read)."""

    def text(self) -> str:
        """`Xid 31 on GPU 0 at 12:01:06 (python3, pid 477): GPU memory page fault: …`."""
        where = f"GPU {self.gpu}" if self.gpu is not None else f"PCI {self.xid.pci}"
        when = datetime.fromtimestamp(self.time).strftime("%H:%M:%S")
        who = ", ".join(
            part
            for part in (self.xid.process, None if self.xid.pid is None else f"pid {self.xid.pid}")
            if part
        )
        return (
            f"Xid {self.xid.code} on {where} at {when}"
            + (f" ({who})" if who else "")
            + f": {self.xid.meaning}"
        )

    def record(self) -> dict[str, Any]:
        return {
            "time": self.time,
            "code": self.xid.code,
            "pci": self.xid.pci,
            "gpu": self.gpu,
            "pid": self.xid.pid,
            "process": self.xid.process,
            "meaning": self.xid.meaning,
            "hardware": self.xid.hardware,
        }

    def near(self, at: float) -> bool:
        """Within NEAR_CRASH_S of `at` (a crash's time on the same host's clock)."""
        return abs(self.time - at) <= NEAR_CRASH_S


def parse_kernel_log(
    host: str, lines: Sequence[str], gpus: Sequence[GpuState] = ()
) -> tuple[list[XidSeen], str | None]:
    """The Xids among `journalctl -o json` lines of the kernel, and the last cursor read."""
    found: list[XidSeen] = []
    cursor: str | None = None
    for line in lines:
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if not isinstance(entry, dict):
            continue
        if isinstance(entry.get("__CURSOR"), str):
            cursor = entry["__CURSOR"]
        message = entry.get("MESSAGE")
        if not isinstance(message, str):
            continue  # binary or missing: no driver line
        xid = parse_xid(message)
        if xid is None:
            continue
        try:
            at = int(entry["__REALTIME_TIMESTAMP"]) / 1e6
        except (KeyError, TypeError, ValueError):
            continue
        found.append(XidSeen(host, at, xid, gpu_at(xid.pci, gpus)))
    return found, cursor


async def read_xids(
    session: HostSession,
    after: str | None,
    gpus: Sequence[GpuState] = (),
    *,
    audited: bool = False,
) -> tuple[list[XidSeen], str | None]:
    """The Xids logged since cursor `after` (None: in the last LOOK_BACK_S), and the cursor to
    read on from (`after` again when nothing new was read; None when the log could not be
    read from there)."""
    command = remote.kernel_log(after, LOOK_BACK_S, audited=audited)
    result = await session.run(command, timeout=READ_TIMEOUT_S, check=False)
    if result.returncode != 0:  # a cursor gone with a rotated journal too: the next read
        return [], None  # looks back LOOK_BACK_S again (the poll drops what it has seen)
    found, cursor = parse_kernel_log(session.name, result.stdout.splitlines(), gpus)
    return found, cursor or after
