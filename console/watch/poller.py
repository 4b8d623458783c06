"""Numbers beside the journal: each host's `/metrics` through its session, or the whole fleet
from Prometheus, turned into `MetricsUpdated` events that name their source.

The journal's decode lines stay the primary source (they come with the line that produced
them). These keep the fleet table's numbers alive where the journal has none: a profile whose
filter hides the decode lines, journald's rate limit dropping them, or a fleet too large to
follow every journal. With `prometheus_url` one `query_range` per metric serves every host,
and no host needs a session for its numbers.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence

from console.hosts.events import MetricsUpdated
from console.hosts.profiles import Profile
from console.transport.http import HttpError
from console.transport.prometheus import PrometheusError
from console.transport.ssh import Disconnected, HostSession
from console.watch.server_metrics import MetricsUnavailable
from console.watch.sources import HostNumbers, from_prometheus, from_server

log = logging.getLogger(__name__)

Emit = Callable[[MetricsUpdated], None]


def as_event(numbers: HostNumbers) -> MetricsUpdated:
    """The journal's names (`accept_len`, `gen_throughput`, …) so every consumer reads one shape.

    `accept_len` is the window's (counter deltas) when there is one, else the last batch's."""
    accept = (
        numbers.accept_len_window if numbers.accept_len_window is not None else numbers.accept_len
    )
    found = {
        "accept_len": accept,
        "accept_rate": numbers.accept_rate,
        "gen_throughput": numbers.gen_throughput,
        "running": numbers.running,
        "queued": numbers.queued,
        "token_usage": numbers.token_usage,
    }
    values = {k: v for k, v in found.items() if v is not None}
    return MetricsUpdated(
        numbers.host, numbers.time, values, numbers.cuda_graph, source=numbers.source
    )


async def poll_server(
    session: HostSession, profile: Profile, emit: Emit, interval_s: float
) -> None:
    """Forever: one window of `interval_s` between two reads of the host's `/metrics`."""
    while True:
        await session.wait_connected()
        try:
            emit(as_event(await from_server(session, profile, interval_s)))
        except MetricsUnavailable as exc:
            log.info("%s: %s; reading /metrics again in 10 intervals", profile.name, exc)
            await asyncio.sleep(interval_s * 10)
        except (HttpError, Disconnected) as exc:
            log.debug("%s: /metrics: %s", profile.name, exc)
            await asyncio.sleep(interval_s)


async def poll_prometheus(
    url: str,
    profiles: Sequence[Profile],
    emit: Emit,
    interval_s: float,
    *,
    window_s: float = 60.0,
) -> None:
    """Forever: every host's numbers from one round of queries, every `interval_s`."""
    while True:
        try:
            for numbers in (await from_prometheus(url, profiles, window_s)).values():
                emit(as_event(numbers))
        except PrometheusError as exc:
            log.warning("%s", exc)
        await asyncio.sleep(interval_s)
