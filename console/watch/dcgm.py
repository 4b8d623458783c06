"""The GPUs from Prometheus, where the team runs NVIDIA's dcgm-exporter: the same readings
nvidia-smi gives over SSH, for the whole fleet in one round of queries.

One `query_range` per field over the last minute (`DCGM_FI_DEV_FB_USED` and `_FB_FREE`, MiB;
`_GPU_UTIL`, %; `_POWER_USAGE`, W; `_GPU_TEMP`; `_SM_CLOCK`, MHz), the newest point of each
GPU's series. A series belongs to the host whose profile name or `[ssh] host` is its
`Hostname` label (dcgm-exporter's: the node's name), its GPU by the `gpu` label.
`DCGM_FI_DEV_XID_ERRORS` holds each GPU's last Xid code: a series whose value turns non-zero
in the window is an Xid at that time (no pid, no process: the exporter does not say).
The exporter reports no power limit and no clock-event reasons: those stay unknown here, and
the total memory is used + free (the driver's reserve, a few hundred MiB, not counted).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import replace

from console.hosts import clock as clocks
from console.hosts.clock import Clock
from console.hosts.profiles import Profile
from console.transport.prometheus import PrometheusError, Series, query_range
from console.watch.gpu_reader import GpuReading
from console.watch.gpus import GpuState
from console.watch.sources import owners_of
from console.watch.xid import Xid
from console.watch.xid_reader import XidSeen

FIELDS = {
    "memory_used_mib": "DCGM_FI_DEV_FB_USED",
    "memory_free_mib": "DCGM_FI_DEV_FB_FREE",
    "util_pct": "DCGM_FI_DEV_GPU_UTIL",
    "power_w": "DCGM_FI_DEV_POWER_USAGE",
    "temp_c": "DCGM_FI_DEV_GPU_TEMP",
    "sm_clock_mhz": "DCGM_FI_DEV_SM_CLOCK",
}
XID_ERRORS = "DCGM_FI_DEV_XID_ERRORS"
log = logging.getLogger(__name__)

WINDOW_S = 60.0
STEP_S = 5.0


def _gpu_key(series: Series) -> int | None:
    try:
        return int(series.labels.get("gpu", ""))
    except ValueError:
        return None


def _xids(host: str, series: Series, index: int, since: float) -> list[XidSeen]:
    """The Xids a series shows: dcgm-exporter labels each code (`err_code`), so a new Xid is
    a series that begins after `since` (the window's first step), or a value that turns to
    another code within one; a series already there when the window opened is an old Xid."""
    found: list[XidSeen] = []
    pci = series.labels.get("pci_bus_id", "")
    before = series.points[0][1] if series.points[0][0] <= since else 0.0
    for at, value in series.points:
        if value and value != before:
            xid = Xid(code=int(value), pci=pci, pid=None, process=None, detail="from DCGM")
            found.append(XidSeen(host, at, xid, index))
        before = value
    return found


async def gpus_from_prometheus(
    url: str, profiles: Sequence[Profile], *, now: float | None = None
) -> dict[str, GpuReading]:
    """Each host's GPUs (and the Xids of the last minute) as Prometheus has them; hosts with
    no dcgm-exporter series are left out."""
    end = time.time() if now is None else now
    start = end - WINDOW_S
    names = [*FIELDS.values(), XID_ERRORS]
    answers = await asyncio.gather(
        *(query_range(url, name, start=start, end=end, step=STEP_S) for name in names)
    )
    owners = owners_of(profiles)
    values: dict[str, dict[int, dict[str, float]]] = {}
    labels: dict[tuple[str, int], dict[str, str]] = {}
    xids: dict[str, list[XidSeen]] = {}
    stamp: dict[str, float] = {}
    for name, series_list in zip(names, answers, strict=True):
        for series in series_list:
            host = owners.get(series.labels.get("Hostname", ""))
            index = _gpu_key(series)
            if host is None or index is None or not series.points:
                continue
            if name == XID_ERRORS:
                xids.setdefault(host, []).extend(_xids(host, series, index, start + STEP_S))
                continue
            field = next(f for f, metric in FIELDS.items() if metric == name)
            values.setdefault(host, {}).setdefault(index, {})[field] = series.points[-1][1]
            labels[(host, index)] = series.labels
            stamp[host] = max(stamp.get(host, 0.0), series.points[-1][0])
    readings: dict[str, GpuReading] = {}
    for host, by_gpu in values.items():
        gpus = []
        for index, fields in sorted(by_gpu.items()):
            meta = labels[(host, index)]
            used, free = fields.get("memory_used_mib"), fields.get("memory_free_mib")
            gpus.append(
                GpuState(
                    index=index,
                    name=meta.get("modelName", ""),
                    uuid=meta.get("UUID", ""),
                    memory_used_mib=used,
                    memory_total_mib=None if used is None or free is None else used + free,
                    util_pct=fields.get("util_pct"),
                    temp_c=fields.get("temp_c"),
                    power_w=fields.get("power_w"),
                    sm_clock_mhz=fields.get("sm_clock_mhz"),
                    pci=meta.get("pci_bus_id", ""),
                )
            )
        seen = tuple(sorted(xids.get(host, ()), key=lambda x: x.time))
        readings[host] = GpuReading(host, stamp[host], tuple(gpus), xids=seen)
    return readings


async def poll_dcgm(
    url: str,
    profiles: Sequence[Profile],
    emit: Callable[[GpuReading], None],
    interval_s: float,
    *,
    clock: Clock,
) -> None:
    """Forever: every host's GPUs from Prometheus every `interval_s`. An Xid is emitted once:
    the next rounds' windows still hold its series (the exporter keeps a GPU's last code), so
    a GPU's code is news only when it differs from the one already said."""
    said: dict[tuple[str, int | None], int] = {}
    while True:
        try:
            readings = await gpus_from_prometheus(url, profiles, now=clock.time())
        except PrometheusError as exc:
            log.warning("GPUs from %s", exc)
            readings = {}
        for host, reading in readings.items():
            fresh = []
            for xid in reading.xids:
                if said.get((host, xid.gpu)) != xid.xid.code:
                    said[(host, xid.gpu)] = xid.xid.code
                    fresh.append(xid)
            emit(replace(reading, xids=tuple(fresh)))
        await clocks.sleep(clock, interval_s)
