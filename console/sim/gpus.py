"""A simulated host's `nvidia-smi --query-gpu=… --format=csv[,noheader][,nounits]`.

Shaped on the real H100's answers (driver 580.159.04, tests/fixtures/gpu): the header names
each field as the driver does (`clocks.sm` asked comes back `clocks.current.sm [MHz]`,
`clocks_throttle_reasons.active` as `clocks_event_reasons.active`), units in the header and,
without `nounits`, in each cell. The readings follow the server: no process, the card idles
(0 MiB, 0 %, 75 W, `0x…01` gpu_idle); loading, the weights are in memory; serving, SGLang's
static pool (`--mem-fraction-static`, 0.88 of the card by default on an 80 GB card: weights
and the KV cache, allocated once at start, whatever share of it is in use) at 100 % and at the
power limit (`0x…04` sw_power_cap), as the real card under load read.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Phase = Literal["idle", "loading", "serving"]


@dataclass(frozen=True)
class Card:
    memory_mib: int
    power_limit_w: float


CARDS = {
    "NVIDIA H100 80GB HBM3": Card(81559, 700.0),  # the reference card's own readings
    "NVIDIA H200": Card(143771, 700.0),
}
DEFAULT_CARD = CARDS["NVIDIA H100 80GB HBM3"]

_HEADERS = {
    "gpu_name": "name",
    "gpu_uuid": "uuid",
    "clocks.sm": "clocks.current.sm",
    "clocks_throttle_reasons.active": "clocks_event_reasons.active",
}
_UNITS = {
    "memory.used": "MiB",
    "memory.total": "MiB",
    "memory.free": "MiB",
    "utilization.gpu": "%",
    "utilization.memory": "%",
    "power.draw": "W",
    "power.limit": "W",
    "clocks.current.sm": "MHz",
    "clocks.current.memory": "MHz",
}


def pci_bus_id(index: int) -> str:
    """GPU `index`'s address, numbered on from the reference card's `00000000:00:06.0`."""
    return f"00000000:00:{6 + index:02X}.0"


def xid_line(index: int, pid: int) -> str:
    """The kernel's line for an illegal memory access on GPU `index` by process `pid`: the
    real H200's Xid 31 (tests/fixtures/gpu), at this GPU's address."""
    return (
        f"NVRM: Xid (PCI:0000:00:{6 + index:02x}): 31, pid={pid}, name=python3, channel "
        "0x0000000a, intr 00000000. MMU Fault: ENGINE GRAPHICS GPC1 GPCCLIENT_T1_8 faulted @ "
        "0x809d_93e00000. Fault is of type FAULT_PDE ACCESS_TYPE_VIRT_WRITE"
    )


class UnknownField(ValueError):
    """A field the real tool refuses (`Field "x" is not a valid field to query.`)."""


STATIC_POOL = 0.88
"""The share of a card SGLang takes at start for weights and KV cache (mem_fraction_static)."""
HEAVY = 0.8
"""The share of `--max-running-requests` in flight from which the card runs at its power
cap (the captured H100: 100 %, 688 W of 700 W, `sw_power_cap`, SM clock held at 1410 MHz)."""
IDLE_W = 74.87


@dataclass(frozen=True)
class Load:
    """What the server does to its GPUs: the share of its request slots in use, and the share
    of each card its static pool took (`--mem-fraction-static`)."""

    running: float = 1.0
    mem_fraction: float = STATIC_POOL


def reading(name: str, index: int, phase: Phase, load: Load = Load()) -> dict[str, str]:
    """GPU `index`'s fields as nvidia-smi names them, without units. Serving, memory is the
    static pool whatever is in flight; utilization and power follow the requests in flight,
    and a heavy load holds the card at its power cap."""
    card = CARDS.get(name, DEFAULT_CARD)
    used = {
        "idle": 0,
        "loading": card.memory_mib // 4,
        "serving": int(card.memory_mib * load.mem_fraction),
    }[phase]
    share = min(1.0, max(0.0, load.running)) if phase == "serving" else 0.0
    capped = share >= HEAVY
    peak = card.power_limit_w * 0.983
    power = peak if capped else IDLE_W + (peak - IDLE_W) * share / HEAVY * 0.9
    events = 0x4 if capped else 0x0 if share else 0x1  # sw_power_cap / none / gpu_idle
    return {
        "index": str(index),
        "name": name,
        "uuid": f"GPU-8773e22d-9771-f93a-b202-{index:012x}",
        "pci.bus_id": pci_bus_id(index),
        "driver_version": "580.159.04",
        "memory.total": str(card.memory_mib),
        "memory.used": str(used),
        "memory.free": str(card.memory_mib - used - 480),
        "utilization.gpu": str(round(100 * min(1.0, 0.4 + share))) if share else "0",
        "utilization.memory": str(round(33 * share)),
        "temperature.gpu": str(round(34 + 17 * min(1.0, share / HEAVY))),
        "power.draw": f"{power:.2f}",
        "power.limit": f"{card.power_limit_w:.2f}",
        "clocks.current.sm": "1410" if capped else "1980" if share else "345",
        "clocks.current.memory": "2619",
        "ecc.errors.uncorrected.volatile.total": "0",
        "pstate": "P0",
        "clocks_event_reasons.active": f"0x{events:016x}",
    }


def answer(names: list[str], fields: list[str], fmt: str, phase: Phase, load: Load = Load()) -> str:
    """The tool's stdout for `--query-gpu=FIELDS --format=FMT` on GPUs `names`."""
    options = set(fmt.split(","))
    headers = [_HEADERS.get(f, f) for f in fields]
    readings = [reading(n, i, phase, load) for i, n in enumerate(names)]
    for field, header in zip(fields, headers, strict=True):
        if header not in readings[0]:
            raise UnknownField(field)
    lines = []
    if "noheader" not in options:
        lines.append(", ".join(f"{h} [{_UNITS[h]}]" if h in _UNITS else h for h in headers))
    for row in readings:
        cells = []
        for header in headers:
            unit = _UNITS.get(header)
            value = row[header]
            cells.append(f"{value} {unit}" if unit and "nounits" not in options else value)
        lines.append(", ".join(cells))
    return "".join(f"{line}\n" for line in lines)
