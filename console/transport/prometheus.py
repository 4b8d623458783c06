"""Prometheus's HTTP API (`/api/v1/query_range`), reached directly or through a host's SSH
connection.

A team that already scrapes its SGLang servers has every host's numbers in one place: one
`query_range` per metric answers for hundreds of hosts at once, where reading each server
would take an SSH session per host. The request is the same plain HTTP/1.0 as
console/transport/http.py speaks to the servers; through SSH it goes over a direct TCP channel
from that host (for a Prometheus only reachable from inside the fleet).
"""

from __future__ import annotations

import asyncio
import math
import urllib.parse
from dataclasses import dataclass
from typing import Any

from console.transport.http import HttpError, HttpResponse, build_request, parse_response
from console.transport.ssh import Disconnected, HostSession

MAX_RESPONSE = 32 * 1024 * 1024


class PrometheusError(Exception):
    """Prometheus could not be reached, or refused the query (the message says which)."""


@dataclass(frozen=True)
class Endpoint:
    host: str
    port: int
    path: str
    """The URL's path prefix (a Prometheus behind `--web.route-prefix`), without the final '/'."""


def parse_url(url: str) -> Endpoint:
    """`http://HOST[:PORT][/prefix]`; raises ValueError naming what is wrong."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme != "http":
        raise ValueError(f"prometheus_url {url!r}: only http:// is supported")
    if not parts.hostname:
        raise ValueError(f"prometheus_url {url!r}: no host")
    if parts.query or parts.fragment or parts.username:
        raise ValueError(f"prometheus_url {url!r}: no query, fragment or user part")
    try:
        port = parts.port or 80
    except ValueError:
        raise ValueError(f"prometheus_url {url!r}: bad port") from None
    return Endpoint(parts.hostname, port, parts.path.rstrip("/"))


@dataclass(frozen=True)
class Series:
    labels: dict[str, str]
    points: tuple[tuple[float, float], ...]
    """(unix time, value), oldest first; NaN values left out."""


async def _read_all(reader: Any) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while chunk := await reader.read(65536):
        chunks.append(chunk)
        size += len(chunk)
        if size > MAX_RESPONSE:
            raise HttpError(f"the response is larger than {MAX_RESPONSE} bytes")
    return b"".join(chunks)


async def _get(endpoint: Endpoint, path: str, via: HostSession | None, timeout: float) -> bytes:
    data = build_request("GET", endpoint.path + path, endpoint.port, host=endpoint.host)
    where = f"{endpoint.host}:{endpoint.port}" + (f" (through {via.name})" if via else "")
    reader: Any
    writer: Any
    try:
        async with asyncio.timeout(timeout):
            if via is None:
                reader, writer = await asyncio.open_connection(endpoint.host, endpoint.port)
            else:
                reader, writer = await via.open_tcp(endpoint.port, endpoint.host)
            try:
                writer.write(data)
                return await _read_all(reader)
            finally:
                writer.close()
    except TimeoutError:
        raise PrometheusError(f"prometheus at {where}: no answer in {timeout:.0f}s") from None
    except (OSError, Disconnected, HttpError) as exc:
        raise PrometheusError(f"prometheus at {where}: {exc}") from None


def _result(response: HttpResponse) -> list[dict[str, Any]]:
    try:
        body = response.json()
    except HttpError as exc:
        raise PrometheusError(str(exc)) from None
    if not isinstance(body, dict) or body.get("status") != "success":
        error = body.get("error") if isinstance(body, dict) else None
        raise PrometheusError(f"HTTP {response.status}: {error or 'not a Prometheus answer'}")
    result = body.get("data", {}).get("result")
    if not isinstance(result, list):
        raise PrometheusError("the answer has no data.result list")
    return result


async def query_range(
    url: str,
    query: str,
    *,
    start: float,
    end: float,
    step: float,
    via: HostSession | None = None,
    timeout: float = 15.0,
) -> list[Series]:
    """Every series `query` gives between `start` and `end` (unix seconds), `step` apart."""
    endpoint = parse_url(url)
    params = urllib.parse.urlencode(
        {"query": query, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{step:g}"}
    )
    raw = await _get(endpoint, f"/api/v1/query_range?{params}", via, timeout)
    try:
        response = parse_response(raw)
    except HttpError as exc:
        raise PrometheusError(f"prometheus at {endpoint.host}:{endpoint.port}: {exc}") from None
    series: list[Series] = []
    for item in _result(response):
        points = tuple(
            (float(t), float(v)) for t, v in item.get("values", ()) if math.isfinite(float(v))
        )
        series.append(Series(dict(item.get("metric", {})), points))
    return series
