"""SGLang's own numbers, read from its `/metrics` page through the host's SSH connection.

With `--enable-metrics` SGLang exports the speculative-decoding numbers itself, so they reach
specops even when the journal is filtered, rate-limited or silent. The page comes over a
direct TCP channel of the existing SSH connection (console/transport/http.py; no port
forward). A real page is ~170 KB, most of it histograms nobody here reads, so it is cut down
to the wanted families before `prometheus_client.parser` sees it. Names come in two spellings:
`sglang:spec_accept_length` in the text format, `sglang_spec_accept_length` where
prometheus_client escaped them for OpenMetrics; both are read.

The accept length over a window comes from counter deltas: generated tokens over verify calls
between two reads (each verify call of a request yields its accepted drafts plus the bonus
token), which covers every decode step of the window rather than the last batch the
`spec_accept_length` gauge reports.
"""

from __future__ import annotations

import math
import re
import time
from collections import defaultdict
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families

from console.transport.http import HttpError, request
from console.transport.ssh import HostSession

METRICS_PATH = "/metrics"

GAUGES = (
    "spec_accept_length",
    "spec_accept_rate",
    "gen_throughput",
    "num_running_reqs",
    "num_queue_reqs",
    "is_cuda_graph",
    "token_usage",
    "cache_hit_rate",
    "num_used_tokens",
)
COUNTERS = ("generation_tokens_total", "spec_verify_calls_total")
AVERAGED = frozenset({"spec_accept_length", "spec_accept_rate", "token_usage", "cache_hit_rate"})
"""Per-rank values of one batch (and each rank's share of its own KV cache): their mean. The
others add up over data-parallel ranks."""

_WANTED = frozenset(GAUGES + COUNTERS)
_SAMPLE_RE = re.compile(r"sglang[:_]([A-Za-z0-9_]+)")


def metric_name(sample: str) -> str | None:
    """`spec_accept_length` for `sglang:spec_accept_length` and `sglang_spec_accept_length`."""
    match = _SAMPLE_RE.fullmatch(sample)
    return match.group(1) if match else None


def cut_page(page: str) -> str:
    """Only the sample lines of the wanted families (no comments: they may name the other
    spelling, which the text parser would take for a different family)."""
    kept: list[str] = []
    for line in page.splitlines():
        if not line.startswith("sglang"):
            continue
        end = min((i for i in (line.find("{"), line.find(" ")) if i >= 0), default=len(line))
        name = metric_name(line[:end])
        if name in _WANTED:
            kept.append(line)
    return "\n".join(kept) + "\n" if kept else ""


@dataclass(frozen=True)
class ServerMetrics:
    """One read of the page: the gauges (the last batch) and the counters (since start)."""

    time: float
    values: dict[str, float] = field(default_factory=dict)
    """Metric name (no `sglang` prefix) → value, for the families the page had."""

    def get(self, name: str) -> float | None:
        return self.values.get(name)


def parse_page(page: str, at: float | None = None) -> ServerMetrics:
    """The wanted families of a `/metrics` page, summed or averaged over their label sets."""
    groups: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for family in text_string_to_metric_families(cut_page(page)):
        for sample in family.samples:
            name = metric_name(sample.name)
            if name is None or not math.isfinite(sample.value):
                continue  # NaN or ±Inf is no number to show (a gauge before its first batch)
            # TP ranks of one data-parallel rank report the same batch: one value per dp_rank.
            groups[name][sample.labels.get("dp_rank", "")].append(sample.value)
    values: dict[str, float] = {}
    for name, by_rank in groups.items():
        if name in COUNTERS:
            values[name] = sum(sum(v) for v in by_rank.values())
        elif name in AVERAGED:
            flat = [x for v in by_rank.values() for x in v]
            values[name] = sum(flat) / len(flat)
        else:
            values[name] = sum(max(v) for v in by_rank.values())
    return ServerMetrics(time.time() if at is None else at, values)


def accept_length_between(earlier: ServerMetrics, later: ServerMetrics) -> float | None:
    """Generated tokens per verify call between two reads; None without decoding or after a
    restart (a counter went back)."""
    tokens = [m.get("generation_tokens_total") for m in (earlier, later)]
    calls = [m.get("spec_verify_calls_total") for m in (earlier, later)]
    if None in tokens or None in calls:
        return None
    d_tokens = float(tokens[1] or 0) - float(tokens[0] or 0)
    d_calls = float(calls[1] or 0) - float(calls[0] or 0)
    if d_tokens < 0 or d_calls <= 0:
        return None
    return d_tokens / d_calls


class MetricsUnavailable(Exception):
    """The server answered without a usable page (not started with --enable-metrics?)."""


async def read_server_metrics(
    session: HostSession, port: int, *, timeout: float = 10.0
) -> ServerMetrics:
    """One read of `/metrics` on the host's `port`. Raises MetricsUnavailable, HttpError,
    PortClosed (a subclass of HttpError) or Disconnected."""
    response = await request(session, port, "GET", METRICS_PATH, timeout=timeout)
    if response.status == 404:
        raise MetricsUnavailable(
            f"{METRICS_PATH} not found on port {port}: is the server started with --enable-metrics?"
        )
    if response.status != 200:
        raise MetricsUnavailable(f"{METRICS_PATH}: HTTP {response.status} {response.reason}")
    try:
        metrics = parse_page(response.body.decode("utf-8", "replace"))
    except ValueError as exc:
        raise HttpError(f"{METRICS_PATH}: not a metrics page: {exc}") from None
    if not metrics.values:
        raise MetricsUnavailable(f"{METRICS_PATH} has no sglang metrics")
    return metrics
