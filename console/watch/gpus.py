"""The GPUs a host's server runs on, as `nvidia-smi --query-gpu` reports them.

One query per poll for every GPU (`QUERY`, `--format=csv,nounits`): memory used and total,
utilization, temperature, power draw and limit, SM clock, the active clock-event reasons and
the uncorrected ECC errors. The header names the columns, so a driver that spells a field
otherwise (`clocks_throttle_reasons.active` comes back as `clocks_event_reasons.active`;
`clocks.sm` as `clocks.current.sm`) or keeps units in a cell (`81559 MiB`) reads the same.
`[N/A]` and `[Not Supported]` are no value. The clock-event bit mask is decoded by name, with
nvml.h's bits (`0x4` is `sw_power_cap`: the card at its power limit; tok/s falls with no log
line at all).

Pure: text in, records out; no I/O, no Textual.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

QUERY_FIELDS = (
    "index",
    "name",
    "uuid",
    "pci.bus_id",
    "memory.used",
    "memory.total",
    "utilization.gpu",
    "temperature.gpu",
    "power.draw",
    "power.limit",
    "clocks.sm",
    "clocks_event_reasons.active",
    "ecc.errors.uncorrected.volatile.total",
)
QUERY = ("nvidia-smi", f"--query-gpu={','.join(QUERY_FIELDS)}", "--format=csv,nounits")
"""The command, with the header: columns are read by name, whatever order or spelling."""

ALIASES = {
    "gpu_name": "name",
    "gpu_uuid": "uuid",
    "gpu_bus_id": "pci.bus_id",
    "clocks.current.sm": "clocks.sm",
    "clocks_throttle_reasons.active": "clocks_event_reasons.active",
}
"""Other spellings `nvidia-smi --help-query-gpu` lists for the same field."""

CLOCK_EVENTS = (
    (0x1, "gpu_idle"),
    (0x2, "applications_clocks_setting"),
    (0x4, "sw_power_cap"),
    (0x8, "hw_slowdown"),
    (0x10, "sync_boost"),
    (0x20, "sw_thermal_slowdown"),
    (0x40, "hw_thermal_slowdown"),
    (0x80, "hw_power_brake_slowdown"),
    (0x100, "display_clock_setting"),
)
"""nvml.h's `nvmlClocksEventReason…` bits, by the names `--help-query-gpu` gives them."""
SLOWED = frozenset(name for _, name in CLOCK_EVENTS) - {"gpu_idle", "applications_clocks_setting"}
"""The reasons that mean the card runs below the clocks asked for: capped or slowed."""

_MISSING = frozenset({"", "n/a", "[n/a]", "not supported", "[not supported]", "unknown"})
_NUMBER = re.compile(r"^\s*([-+]?\d+(?:\.\d+)?)\s*(?:[A-Za-z%]+)?\s*$")


class GpuQueryError(ValueError):
    """Output that is not the query's CSV (a wrapper's message, an error from the driver)."""


@dataclass(frozen=True)
class GpuState:
    index: int
    name: str
    uuid: str
    memory_used_mib: float | None = None
    memory_total_mib: float | None = None
    util_pct: float | None = None
    temp_c: float | None = None
    power_w: float | None = None
    power_limit_w: float | None = None
    sm_clock_mhz: float | None = None
    clock_events: tuple[str, ...] = ()
    ecc_uncorrected: int | None = None
    pci: str = ""
    """Its PCI address as nvidia-smi prints it (`00000000:00:06.0`): what an Xid names."""

    @property
    def slowed(self) -> tuple[str, ...]:
        """The active reasons that hold its clocks down (a power cap, a thermal slowdown)."""
        return tuple(e for e in self.clock_events if e in SLOWED)

    def record(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "name": self.name,
            "memory_used_mib": self.memory_used_mib,
            "memory_total_mib": self.memory_total_mib,
            "util_pct": self.util_pct,
            "temp_c": self.temp_c,
            "power_w": self.power_w,
            "power_limit_w": self.power_limit_w,
            "sm_clock_mhz": self.sm_clock_mhz,
            "clock_events": list(self.clock_events),
            "ecc_uncorrected": self.ecc_uncorrected,
            "pci": self.pci,
        }


def clock_events(mask: str | None) -> tuple[str, ...]:
    """`0x0000000000000005` → ("gpu_idle", "sw_power_cap"); a bit nvml.h does not name comes
    back as its hex value."""
    if mask is None:
        return ()
    try:
        bits = int(mask, 16)
    except ValueError:
        return ()
    names = [name for bit, name in CLOCK_EVENTS if bits & bit]
    known = sum(bit for bit, _ in CLOCK_EVENTS)
    names += [hex(1 << n) for n in range(64) if bits & ~known & (1 << n)]
    return tuple(names)


def _value(text: str) -> str | None:
    text = text.strip()
    return None if text.lower() in _MISSING else text


def _number(text: str | None) -> float | None:
    if text is None:
        return None
    match = _NUMBER.match(text)
    return float(match.group(1)) if match else None


def _field(header: str) -> str:
    """`memory.used [MiB]` → `memory.used`; another spelling → the query's own."""
    name = header.split("[", 1)[0].strip()
    return ALIASES.get(name, name)


def parse_gpus(text: str) -> list[GpuState]:
    """Every GPU row of `nvidia-smi --query-gpu=… --format=csv[,nounits]` output, by its header.
    Raises GpuQueryError when the text is not that CSV."""
    rows = [row for row in csv.reader(text.splitlines(), skipinitialspace=True) if row]
    if not rows:
        return []
    header = [_field(h) for h in rows[0]]
    if "index" not in header or "uuid" not in header:
        raise GpuQueryError(f"not nvidia-smi's CSV: {', '.join(rows[0])[:120]}")
    found: list[GpuState] = []
    for row in rows[1:]:
        if len(row) != len(header):
            raise GpuQueryError(f"a row of {len(row)} fields under {len(header)} columns")
        cells: Mapping[str, str | None] = {
            name: _value(cell) for name, cell in zip(header, row, strict=True)
        }
        index = _number(cells.get("index"))
        if index is None:
            raise GpuQueryError(f"a row without a GPU index: {', '.join(row)[:120]}")
        ecc = _number(cells.get("ecc.errors.uncorrected.volatile.total"))
        found.append(
            GpuState(
                index=int(index),
                name=cells.get("name") or "",
                uuid=cells.get("uuid") or "",
                memory_used_mib=_number(cells.get("memory.used")),
                memory_total_mib=_number(cells.get("memory.total")),
                util_pct=_number(cells.get("utilization.gpu")),
                temp_c=_number(cells.get("temperature.gpu")),
                power_w=_number(cells.get("power.draw")),
                power_limit_w=_number(cells.get("power.limit")),
                sm_clock_mhz=_number(cells.get("clocks.sm")),
                clock_events=clock_events(cells.get("clocks_event_reasons.active")),
                ecc_uncorrected=None if ecc is None else int(ecc),
                pci=cells.get("pci.bus_id") or "",
            )
        )
    return found


def _gib(mib: float) -> str:
    return f"{mib / 1024:.0f}"


def fullest(gpus: Sequence[GpuState]) -> GpuState | None:
    """The GPU with the largest share of its memory used (the one a KV cache fills first)."""
    known = [g for g in gpus if g.memory_used_mib is not None and g.memory_total_mib]
    return max(
        known, key=lambda g: (g.memory_used_mib or 0) / (g.memory_total_mib or 1), default=None
    )


def mean_util(gpus: Sequence[GpuState]) -> float | None:
    values = [g.util_pct for g in gpus if g.util_pct is not None]
    return sum(values) / len(values) if values else None


def slowed_on(gpus: Sequence[GpuState]) -> dict[str, list[int]]:
    """Each active slow-down reason with the GPUs it holds: {"sw_power_cap": [0, 3]}."""
    found: dict[str, list[int]] = {}
    for gpu in gpus:
        for reason in gpu.slowed:
            found.setdefault(reason, []).append(gpu.index)
    return found


def _which(indexes: list[int], count: int) -> str:
    """`all` of them, or runs of GPU indexes: `0-3, 6`."""
    if len(indexes) == count > 1:
        return "all"
    runs: list[list[int]] = []
    for index in sorted(indexes):
        if runs and index == runs[-1][-1] + 1:
            runs[-1].append(index)
        else:
            runs.append([index])
    return ", ".join(f"{r[0]}-{r[-1]}" if len(r) > 2 else ", ".join(map(str, r)) for r in runs)


def compact(gpus: Sequence[GpuState]) -> str:
    """The fleet table's cell: `20/80G 97%↓` — memory of the fullest GPU, the mean
    utilization, `↓` when any GPU's clocks are held down (power cap, thermal slowdown)."""
    if not gpus:
        return ""
    parts = []
    top = fullest(gpus)
    if top is not None:
        parts.append(f"{_gib(top.memory_used_mib or 0)}/{_gib(top.memory_total_mib or 0)}G")
    util = mean_util(gpus)
    if util is not None:
        parts.append(f"{util:.0f}%")
    return " ".join(parts) + ("↓" if slowed_on(gpus) else "")


def summary(gpus: Sequence[GpuState], *, count: bool = True) -> str:
    """One line for `status`: `8 GPUs, fullest 20/80 GiB, util 97%; sw_power_cap on 0, 3`
    (`count=False`: without `8 GPUs, `, where the model is said before it)."""
    if not gpus:
        return "no GPUs"
    parts = [f"{len(gpus)} GPU" + ("s" if len(gpus) > 1 else "")] if count else []
    top = fullest(gpus)
    if top is not None:
        used, total = _gib(top.memory_used_mib or 0), _gib(top.memory_total_mib or 0)
        parts.append(f"{'fullest ' if len(gpus) > 1 else ''}{used}/{total} GiB")
    util = mean_util(gpus)
    if util is not None:
        parts.append(f"util {util:.0f}%")
    text = ", ".join(parts)
    reasons = slowed_on(gpus)
    if reasons:
        text += "; " + "; ".join(
            f"{name} on {_which(idx, len(gpus))}" for name, idx in reasons.items()
        )
    ecc = sum(g.ecc_uncorrected or 0 for g in gpus)
    if ecc:
        text += f"; {ecc} uncorrected ECC errors"
    return text


def gpus_of(record: Mapping[str, Any]) -> list[GpuState]:
    """The GPUs of a `status --json` record (its `gpus`), as states again."""
    return states(record.get("gpus") or ())


def states(records: Sequence[Mapping[str, Any]]) -> list[GpuState]:
    """GPU records (`GpuState.record()`, as a history entry keeps them) as states again; a
    record that is not one (a hostile file's) is left out."""
    found = []
    for gpu in records:
        fields = {k: v for k, v in gpu.items() if k in GpuState.__dataclass_fields__}
        fields["clock_events"] = tuple(str(e) for e in fields.get("clock_events") or ())
        try:
            found.append(GpuState(uuid=str(gpu.get("uuid", "")), **fields))
        except TypeError:
            continue
    return found


def fullest_text(records: Sequence[Mapping[str, Any]]) -> str | None:
    """`GPU 0 70.1 of 80 GiB`: the fullest GPU's memory; None without a reading."""
    top = fullest(states(records))
    if top is None or not isinstance(top.memory_used_mib, int | float):
        return None
    used, total = (top.memory_used_mib or 0) / 1024, (top.memory_total_mib or 0) / 1024
    return f"GPU {top.index} {used:.1f} of {total:.0f} GiB"


def pci_key(address: str) -> tuple[int, int, int] | None:
    """(domain, bus, device) of `00000000:00:06.0` (nvidia-smi) or `0000:00:06` (an Xid line):
    the two spellings of one GPU's address."""
    parts = address.strip().split(":")
    if len(parts) != 3:
        return None
    try:
        return int(parts[0], 16), int(parts[1], 16), int(parts[2].split(".")[0], 16)
    except ValueError:
        return None


def gpu_at(address: str, gpus: Sequence[GpuState]) -> int | None:
    """The index of the GPU at PCI `address`; None when no GPU read has it."""
    key = pci_key(address)
    return next((g.index for g in gpus if key is not None and pci_key(g.pci) == key), None)
