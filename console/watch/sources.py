"""Each host's speculative-decoding numbers from a source other than its journal.

Two sources, each saying what it is, so a number shown is never mistaken for another:

- `server`: the host's own `/metrics` page (console/watch/server_metrics.py), read twice over
  the window through the host's SSH connection;
- `prometheus`: the team's Prometheus, one `query_range` per metric for the whole fleet, so
  hundreds of hosts show numbers without an SSH session each.

A Prometheus series belongs to a host when the host part of its `instance` label (what is
left of the last ':') is the host's name or its `[ssh] host`: scrape configs name targets
`b300-01:30000`, or relabel `instance` so.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from console.hosts import clock as clocks
from console.hosts.profiles import Profile
from console.transport.prometheus import Series, query_range
from console.transport.ssh import HostSession
from console.watch.server_metrics import ServerMetrics, accept_length_between, read_server_metrics

SERVER, PROMETHEUS = "/metrics", "prometheus"


@dataclass(frozen=True)
class HostNumbers:
    host: str
    source: str
    """`/metrics` (the server itself) or `prometheus`: where every number here came from."""
    time: float
    accept_len: float | None = None
    """The last decode batch's accept length (SGLang's `spec_accept_length` gauge)."""
    accept_len_window: float | None = None
    """Generated tokens per verify call over the window, from the two counters."""
    accept_rate: float | None = None
    gen_throughput: float | None = None
    running: float | None = None
    queued: float | None = None
    cuda_graph: bool | None = None
    window_s: float = 0.0
    token_usage: float | None = None
    """The share of the KV cache in use (`sglang:token_usage`, 0–1): what a budget change moves
    and what runs a GPU out of memory."""
    used_tokens: float | None = None
    """KV-cache tokens in use (`sglang:num_used_tokens`)."""
    cache_hit_rate: float | None = None
    """The prefix cache's hit rate (`sglang:cache_hit_rate`, 0–1)."""

    def record(self) -> dict[str, Any]:
        return asdict(self)


def _numbers(
    host: str, source: str, last: ServerMetrics, window_al: float | None, window: float
) -> HostNumbers:
    graph = last.get("is_cuda_graph")
    return HostNumbers(
        host=host,
        source=source,
        time=last.time,
        accept_len=last.get("spec_accept_length"),
        accept_len_window=window_al,
        accept_rate=last.get("spec_accept_rate"),
        gen_throughput=last.get("gen_throughput"),
        running=last.get("num_running_reqs"),
        queued=last.get("num_queue_reqs"),
        cuda_graph=None if graph is None else graph >= 0.5,
        window_s=window,
        token_usage=last.get("token_usage"),
        used_tokens=last.get("num_used_tokens"),
        cache_hit_rate=last.get("cache_hit_rate"),
    )


async def from_server(
    session: HostSession, profile: Profile, window_s: float, *, timeout: float = 10.0
) -> HostNumbers:
    """Two reads of the host's `/metrics`, `window_s` apart (one when the window is 0)."""
    first = await read_server_metrics(session, profile.service.port, timeout=timeout)
    if window_s <= 0:
        return _numbers(profile.name, SERVER, first, None, 0.0)
    await clocks.sleep(session.clock, window_s)
    last = await read_server_metrics(session, profile.service.port, timeout=timeout)
    return _numbers(
        profile.name, SERVER, last, accept_length_between(first, last), last.time - first.time
    )


def _selector(metric: str) -> str:
    # Both spellings: `sglang:x` (text scrape), `sglang_x` (OpenMetrics scrape).
    return f'{{__name__=~"sglang[:_]{metric}"}}'


QUERIES: dict[str, str] = {
    **{
        name: f"avg by (instance) ({_selector(name)})"
        for name in ("spec_accept_length", "spec_accept_rate", "token_usage", "cache_hit_rate")
    },
    "is_cuda_graph": f"max by (instance) ({_selector('is_cuda_graph')})",
    **{
        name: f"sum by (instance) (max by (instance, dp_rank) ({_selector(name)}))"
        for name in ("gen_throughput", "num_running_reqs", "num_queue_reqs", "num_used_tokens")
    },
    **{
        name: f"sum by (instance) ({_selector(name)})"
        for name in ("generation_tokens_total", "spec_verify_calls_total")
    },
}
"""One query per metric for the whole fleet, aggregated as the shipped recording rules are."""


def instance_host(instance: str) -> str:
    host = instance.rsplit(":", 1)[0] if ":" in instance else instance
    return host.strip("[]")


def owners_of(profiles: Sequence[Profile]) -> dict[str, str]:
    """Host names and `[ssh] host` addresses → profile names (a name wins)."""
    owners: dict[str, str] = {}
    for profile in profiles:
        owners.setdefault(profile.ssh.host, profile.name)
    for profile in profiles:
        owners[profile.name] = profile.name  # a name wins over another host's address
    return owners


async def from_prometheus(
    url: str,
    profiles: Sequence[Profile],
    window_s: float,
    *,
    via: HostSession | None = None,
    now: float | None = None,
) -> dict[str, HostNumbers]:
    """Every host's numbers over the last `window_s` seconds; hosts Prometheus has no series
    for are left out."""
    end = time.time() if now is None else now
    start = end - max(window_s, 1.0)
    step = max(1.0, window_s / 60)
    names = list(QUERIES)
    answers = await asyncio.gather(
        *(query_range(url, QUERIES[n], start=start, end=end, step=step, via=via) for n in names)
    )
    owners = owners_of(profiles)
    first: dict[str, dict[str, float]] = {}
    last: dict[str, dict[str, float]] = {}
    stamp: dict[str, float] = {}
    for name, series in zip(names, answers, strict=True):
        for host, s in _by_host(series, owners):
            first.setdefault(host, {})[name] = s.points[0][1]
            last.setdefault(host, {})[name] = s.points[-1][1]
            stamp[host] = max(stamp.get(host, 0.0), s.points[-1][0])
    numbers: dict[str, HostNumbers] = {}
    for host in (p.name for p in profiles):
        if host not in last:
            continue
        window_al = accept_length_between(
            ServerMetrics(start, first[host]), ServerMetrics(stamp[host], last[host])
        )
        numbers[host] = _numbers(
            host, PROMETHEUS, ServerMetrics(stamp[host], last[host]), window_al, end - start
        )
    return numbers


def _by_host(series: Iterable[Series], owners: dict[str, str]) -> Iterable[tuple[str, Series]]:
    for s in series:
        host = owners.get(instance_host(s.labels.get("instance", "")))
        if host is not None and s.points:
            yield host, s
