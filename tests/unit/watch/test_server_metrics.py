"""SGLang's /metrics page: the simulated page is prometheus_client's own (multiprocess mode, as
SGLang 0.5.23 runs it), and the reader takes both spellings and cuts the page first."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from console.sim.metrics_page import ServerState, render, wants_openmetrics
from console.watch.server_metrics import (
    ServerMetrics,
    accept_length_between,
    cut_page,
    metric_name,
    parse_page,
)

STATE = ServerState(
    model_name="/models/Kimi-K2.6",
    accept_length=4.25,
    accept_rate=0.40625,
    gen_throughput=1612.5,
    running=22,
    queued=1,
    cuda_graph=True,
    generation_tokens_total=123456,
    verify_calls_total=29050,
    token_usage=0.4213,
    cache_hit_rate=0.125,
    used_tokens=38144,
    labels=(("variant", "ddtree-b8"),),
)

# SGLang's metrics_collector.py registers these with prometheus_client in multiprocess mode.
REFERENCE = r"""
import json, os, sys, tempfile
os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp()
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client import multiprocess
from prometheus_client.openmetrics.exposition import generate_latest as openmetrics_latest
a = json.loads(sys.argv[1])
docs = {
    "sglang:num_running_reqs": "The number of running requests.",
    "sglang:num_queue_reqs": "The number of requests in the waiting queue.",
    "sglang:gen_throughput": "The generation throughput (token/s).",
    "sglang:spec_accept_length": "Mean acceptance length of speculative decoding "
    "(accepted drafts + bonus token per forward).",
    "sglang:spec_accept_rate": "Speculative acceptance rate (`accepted drafts / proposed "
    "drafts` in batch).",
    "sglang:is_cuda_graph": "Whether the batch is using CUDA graph.",
    "sglang:token_usage": "The token usage.",
    "sglang:cache_hit_rate": "The prefix cache hit rate.",
    "sglang:num_used_tokens": "The number of used tokens.",
}
sched = {"model_name": a["model"], "engine_type": "unified", "tp_rank": "0", "pp_rank": "0",
         "moe_ep_rank": "0", "variant": "ddtree-b8"}
tok = {"model_name": a["model"], "engine_type": "unified", "variant": "ddtree-b8"}
for name, value in a["gauges"].items():
    Gauge(name, docs[name], labelnames=list(sched), multiprocess_mode="mostrecent").labels(
        **sched).set(value)
Counter("sglang:generation_tokens_total", "Number of generation tokens processed.",
        labelnames=[*tok, "is_streaming"]).labels(**tok, is_streaming="false").inc(a["tokens"])
Counter("sglang:spec_verify_calls_total", "Number of speculative decoding verification calls.",
        labelnames=list(tok)).labels(**tok).inc(a["calls"])
Histogram("sglang:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.",
          labelnames=list(tok)).labels(**tok).observe(0.01)
registry = CollectorRegistry()
multiprocess.MultiProcessCollector(registry)
print(json.dumps({"text": generate_latest(registry).decode(),
                  "openmetrics": openmetrics_latest(registry).decode()}))
"""


def reference_pages() -> dict[str, str]:
    """The page prometheus_client itself serves for STATE (text and OpenMetrics)."""
    args = {
        "model": STATE.model_name,
        "gauges": {
            "sglang:num_running_reqs": STATE.running,
            "sglang:num_queue_reqs": STATE.queued,
            "sglang:gen_throughput": STATE.gen_throughput,
            "sglang:spec_accept_length": STATE.accept_length,
            "sglang:spec_accept_rate": STATE.accept_rate,
            "sglang:is_cuda_graph": 1,
            "sglang:token_usage": STATE.token_usage,
            "sglang:cache_hit_rate": STATE.cache_hit_rate,
            "sglang:num_used_tokens": STATE.used_tokens,
        },
        "tokens": STATE.generation_tokens_total,
        "calls": STATE.verify_calls_total,
    }
    result = subprocess.run(
        [sys.executable, "-c", REFERENCE, json.dumps(args)],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    pages: dict[str, str] = json.loads(result.stdout)
    return pages


def families(page: str) -> set[str]:
    """The page as a set of per-family blocks (a real server's family order varies)."""
    blocks: list[list[str]] = []
    for line in page.splitlines():
        if line.startswith("# HELP "):
            blocks.append([])
        if line != "# EOF" and blocks:
            blocks[-1].append(line)
    return {"\n".join(b) for b in blocks if "inter_token_latency" not in b[0]}


@pytest.fixture(scope="module")
def reference() -> dict[str, str]:
    return reference_pages()


@pytest.mark.parametrize("openmetrics", [False, True])
def test_the_simulated_page_is_prometheus_clients_own(
    reference: dict[str, str], openmetrics: bool
) -> None:
    ours = render(STATE, openmetrics=openmetrics)
    theirs = reference["openmetrics" if openmetrics else "text"]
    assert families(ours) == families(theirs)
    assert ours.endswith("# EOF\n") is openmetrics is theirs.endswith("# EOF\n")


@pytest.mark.parametrize("openmetrics", [False, True])
def test_the_reader_takes_both_spellings_from_the_real_page(
    reference: dict[str, str], openmetrics: bool
) -> None:
    page = reference["openmetrics" if openmetrics else "text"]
    assert ("sglang_spec_accept_length{" in page) is openmetrics  # the trap is real
    values = parse_page(page, at=1.0).values
    assert values == {
        "spec_accept_length": 4.25,
        "spec_accept_rate": 0.40625,
        "gen_throughput": 1612.5,
        "num_running_reqs": 22,
        "num_queue_reqs": 1,
        "is_cuda_graph": 1,
        "generation_tokens_total": 123456,
        "spec_verify_calls_total": 29050,
        "token_usage": 0.4213,  # the KV cache (issue 41): what a budget change moves
        "cache_hit_rate": 0.125,
        "num_used_tokens": 38144,
    }


def test_the_page_is_cut_to_the_wanted_samples(reference: dict[str, str]) -> None:
    page = reference["text"]
    cut = cut_page(page)
    assert "inter_token_latency" in page and "inter_token_latency" not in cut
    assert "# HELP" not in cut
    assert len(cut.splitlines()) == 11


def test_names_in_both_spellings() -> None:
    assert metric_name("sglang:spec_accept_length") == "spec_accept_length"
    assert metric_name("sglang_spec_accept_length") == "spec_accept_length"
    assert metric_name("vllm:spec_accept_length") is None


def test_ranks_average_for_accept_length_and_add_up_over_data_parallel_ranks() -> None:
    page = (
        'sglang:spec_accept_length{dp_rank="0",tp_rank="0"} 4.0\n'
        'sglang:spec_accept_length{dp_rank="1",tp_rank="0"} 5.0\n'
        'sglang:gen_throughput{dp_rank="0",tp_rank="0"} 100\n'
        'sglang:gen_throughput{dp_rank="0",tp_rank="1"} 100\n'
        'sglang:gen_throughput{dp_rank="1",tp_rank="0"} 50\n'
    )
    values = parse_page(page).values
    assert values["spec_accept_length"] == 4.5
    assert values["gen_throughput"] == 150  # TP ranks of one batch once, DP ranks summed


def test_nan_and_infinite_samples_are_no_numbers() -> None:
    """The attack run (issue 30): `/metrics` values `NaN` and `-Inf` were shown as numbers."""
    page = (
        'sglang:spec_accept_length{dp_rank="0",tp_rank="0"} NaN\n'
        'sglang:spec_accept_length{dp_rank="1",tp_rank="0"} 4.0\n'
        'sglang:gen_throughput{dp_rank="0",tp_rank="0"} -Inf\n'
        'sglang:num_running_reqs{dp_rank="0",tp_rank="0"} +Inf\n'
    )
    values = parse_page(page).values
    assert values == {"spec_accept_length": 4.0}


def test_accept_length_over_a_window_from_counter_deltas() -> None:
    def read(tokens: float, calls: float) -> ServerMetrics:
        return ServerMetrics(
            0.0, {"generation_tokens_total": tokens, "spec_verify_calls_total": calls}
        )

    assert accept_length_between(read(1000, 250), read(1900, 450)) == 4.5
    assert accept_length_between(read(1000, 250), read(1000, 250)) is None  # idle
    assert accept_length_between(read(1000, 250), read(90, 20)) is None  # restarted
    assert accept_length_between(ServerMetrics(0.0), read(90, 20)) is None


def test_prometheus_negotiates_openmetrics() -> None:
    prometheus = (
        "application/openmetrics-text;version=1.0.0,application/openmetrics-text;"
        "version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
    )
    assert wants_openmetrics(prometheus)
    assert not wants_openmetrics("application/json")
    assert not wants_openmetrics("")
