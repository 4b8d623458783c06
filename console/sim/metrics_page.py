"""The simulated SGLang's `/metrics` page, as SGLang 0.5.23 serves it with `--enable-metrics`.

SGLang exports through `prometheus_client` in multiprocess mode (a registry holding only a
`MultiProcessCollector`), which shapes the page this module reproduces (checked family by
family against prometheus_client 0.26's own output):

- names keep SGLang's colon (`sglang:spec_accept_length`) in the classic text format;
- labels sorted by name; scheduler gauges carry `model_name, engine_type, tp_rank, pp_rank,
  moe_ep_rank`, the tokenizer's counters `model_name, engine_type` (and `is_streaming` on
  `generation_tokens_total`), plus any `--extra-metric-labels`;
- gauges are `mostrecent` (no `pid` label); counters and histograms have no `_created`;
- asked for OpenMetrics (as Prometheus asks by default), prometheus_client >= 0.22 escapes the
  *sample* names to `sglang_…` while `# HELP`/`# TYPE` keep the colon, a counter's family name
  loses `_total`, and the page ends with `# EOF`. So a Prometheus may store only the underscore
  names: readers must match both.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

OPENMETRICS = "application/openmetrics-text; version=1.0.0; charset=utf-8; escaping=underscores"
TEXT = "text/plain; version=0.0.4; charset=utf-8"

# observability/metrics_collector.py (0.5.23) documentation strings, verbatim.
_DOC = {
    "sglang:num_running_reqs": "The number of running requests.",
    "sglang:num_queue_reqs": "The number of requests in the waiting queue.",
    "sglang:gen_throughput": "The generation throughput (token/s).",
    "sglang:spec_accept_length": (
        "Mean acceptance length of speculative decoding "
        "(accepted drafts + bonus token per forward)."
    ),
    "sglang:spec_accept_rate": (
        "Speculative acceptance rate (`accepted drafts / proposed drafts` in batch)."
    ),
    "sglang:is_cuda_graph": "Whether the batch is using CUDA graph.",
    "sglang:token_usage": "The token usage.",
    "sglang:cache_hit_rate": "The prefix cache hit rate.",
    "sglang:num_used_tokens": "The number of used tokens.",
    "sglang:generation_tokens": "Number of generation tokens processed.",
    "sglang:spec_verify_calls": "Number of speculative decoding verification calls.",
}


@dataclass(frozen=True)
class ServerState:
    """What the page reports: the last decode batch's gauges and the counters since start."""

    model_name: str
    accept_length: float
    accept_rate: float
    gen_throughput: float
    running: int
    queued: int
    cuda_graph: bool
    generation_tokens_total: float
    verify_calls_total: float
    token_usage: float = 0.0
    cache_hit_rate: float = 0.0
    used_tokens: int = 0
    labels: tuple[tuple[str, str], ...] = ()
    """`--extra-metric-labels`, applied last (they may override)."""


def _go_float(value: float) -> str:
    """prometheus_client.utils.floatToGoString."""
    if value == math.inf:
        return "+Inf"
    if value == -math.inf:
        return "-Inf"
    if math.isnan(value):
        return "NaN"
    text = repr(float(value))
    dot = text.find(".")
    if value > 0 and dot > 6:
        mantissa = f"{text[0]}.{text[1:dot]}{text[dot + 1 :]}".rstrip("0.")
        return f"{mantissa}e+{dot - 1:02d}"
    return text


def _escape(value: str) -> str:
    return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")


def _labels(labels: dict[str, str]) -> str:
    return "{" + ",".join(f'{k}="{_escape(v)}"' for k, v in sorted(labels.items())) + "}"


def _underscores(name: str) -> str:
    """OpenMetrics `underscores` escaping of a sample name (prometheus_client: ':' → '_')."""
    return "".join(c if c.isascii() and (c.isalnum() or c == "_") else "_" for c in name)


def render(state: ServerState, *, openmetrics: bool = False) -> str:
    """The page for `state`: text format 0.0.4, or OpenMetrics 1.0.0 as prometheus_client has it."""
    tokenizer = {"model_name": state.model_name, "engine_type": "unified", **dict(state.labels)}
    scheduler = {
        "model_name": state.model_name,
        "engine_type": "unified",
        "tp_rank": "0",
        "pp_rank": "0",
        "moe_ep_rank": "0",
        **dict(state.labels),
    }
    families: list[tuple[str, str, str, dict[str, str], float]] = [
        ("sglang:num_running_reqs", "gauge", "", scheduler, state.running),
        ("sglang:num_queue_reqs", "gauge", "", scheduler, state.queued),
        ("sglang:gen_throughput", "gauge", "", scheduler, state.gen_throughput),
        ("sglang:spec_accept_length", "gauge", "", scheduler, state.accept_length),
        ("sglang:spec_accept_rate", "gauge", "", scheduler, state.accept_rate),
        ("sglang:is_cuda_graph", "gauge", "", scheduler, 1.0 if state.cuda_graph else 0.0),
        ("sglang:token_usage", "gauge", "", scheduler, state.token_usage),
        ("sglang:cache_hit_rate", "gauge", "", scheduler, state.cache_hit_rate),
        ("sglang:num_used_tokens", "gauge", "", scheduler, float(state.used_tokens)),
        (
            "sglang:generation_tokens",
            "counter",
            "_total",
            {**tokenizer, "is_streaming": "false"},
            state.generation_tokens_total,
        ),
        ("sglang:spec_verify_calls", "counter", "_total", tokenizer, state.verify_calls_total),
    ]
    out: list[str] = []
    for family, kind, suffix, labels, value in families:
        doc = _DOC[family]
        head = family if openmetrics else family + suffix
        out.append(f"# HELP {head} {_escape(doc) if openmetrics else doc}\n# TYPE {head} {kind}\n")
        sample = family + suffix
        name = _underscores(sample) if openmetrics else sample
        out.append(f"{name}{_labels(labels)} {_go_float(float(value))}\n")
    if openmetrics:
        out.append("# EOF\n")
    return "".join(out)


def wants_openmetrics(accept: str) -> bool:
    """prometheus_client's negotiation: OpenMetrics when the Accept header lists it."""
    return any(
        part.split(";")[0].strip() == "application/openmetrics-text" for part in accept.split(",")
    )
