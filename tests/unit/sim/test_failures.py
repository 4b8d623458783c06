"""The simulated server dies when and how real ones did: in capture, a few decode batches after
ready, in cuBLAS once > 128 requests have run for a while, OOM once the KV cache fills — and a
healthy configuration keeps serving. What is checked is what an operator reads in the journal."""

from __future__ import annotations

import asyncio
import time

import pytest

from console.sim.failures import FailureTiming, failure_timing_from_env
from console.sim.sglang import CRASH_EXIT, SimSGLang, Timing
from console.watch.sglang import DecodeBatch, parse_line
from console.watch.signatures import crash_signature

ARGV = [
    "/usr/bin/python3",
    "-m",
    "sglang.launch_server",
    "--model-path",
    "/models/Kimi-K2.6",
    "--speculative-algorithm",
    "DFLASH",
    "--speculative-dflash-enable-ddtree",
]


class Server:
    def __init__(
        self, *args: str, failures: FailureTiming, run_s: float = 3.0, seed: int = 7
    ) -> None:
        self.lines: list[tuple[float, str]] = []
        self.sim = SimSGLang(
            [*ARGV, *args],
            {},
            lambda message, _priority: self.lines.append((time.monotonic(), message)),
            timing=Timing(load_s=0.05, decode_interval_s=0.02, failures=failures),
            seed=seed,
        )
        self.run_s = run_s

    async def run(self) -> int | None:
        try:
            async with asyncio.timeout(self.run_s):
                return await self.sim.run()
        except TimeoutError:
            return None  # still serving

    def messages(self) -> list[str]:
        return [m for _, m in self.lines]

    def decode_batches_after_ready(self) -> int:
        return sum(isinstance(parse_line(m), DecodeBatch) for m in self.messages())

    def signatures(self) -> set[str]:
        return {s for m in self.messages() if (s := crash_signature(m)) is not None}

    def seconds_ready_to_crash(self) -> float:
        ready = next(t for t, m in self.lines if "ready to roll" in m)
        crash = next(t for t, m in self.lines if "hit an exception" in m)
        return crash - ready


async def test_budget_16_with_graphs_can_fail_in_capture_before_ready() -> None:
    server = Server("--speculative-num-draft-tokens", "16", failures=FailureTiming())
    assert await server.run() == CRASH_EXIT
    text = "\n".join(server.messages())
    assert "ready to roll" not in text
    assert "in capture" in text and "illegal memory access" in text
    assert "Received sigquit from a child process" in text


@pytest.mark.parametrize("batches", [2, 6])
async def test_budget_16_with_graphs_can_fail_n_decode_batches_after_ready(batches: int) -> None:
    failures = FailureTiming(graph_crash="batches", crash_batches=batches)
    server = Server("--speculative-num-draft-tokens", "16", failures=failures)
    assert await server.run() == CRASH_EXIT
    text = "\n".join(server.messages())
    assert "ready to roll" in text
    assert server.decode_batches_after_ready() == batches
    assert "in replay" in text and "an illegal memory access was encountered" in text
    assert "SIGQUIT received" in text
    assert not server.sim.ready  # /health stops answering 200


async def test_either_mode_draws_a_batch_between_2_and_6_when_not_in_capture() -> None:
    seen: set[str] = set()
    for seed in range(12):
        either = FailureTiming(graph_crash="either")
        server = Server("--speculative-num-draft-tokens", "12", failures=either, seed=seed)
        assert await server.run() == CRASH_EXIT
        if "ready to roll" in "\n".join(server.messages()):
            assert 2 <= server.decode_batches_after_ready() <= 6
            seen.add("batches")
        else:
            seen.add("capture")
    assert seen == {"capture", "batches"}


async def test_cublas_only_after_more_than_128_requests_ran_for_a_while() -> None:
    failures = FailureTiming(requests=200, cublas_after_s=0.5)
    server = Server("--max-running-requests", "256", failures=failures)
    assert await server.run() == CRASH_EXIT
    assert "cublas" in server.signatures()
    assert "CUBLAS_STATUS_EXECUTION_FAILED" in "\n".join(server.messages())
    assert 0.5 <= server.seconds_ready_to_crash() < 1.5

    capped = Server("--max-running-requests", "128", failures=failures, run_s=1.5)
    assert await capped.run() is None  # 128 running for longer than that: still serving
    assert capped.signatures() == set()


async def test_oom_once_the_kv_cache_fills() -> None:
    failures = FailureTiming(requests=200, request_tokens=16384, kv_fill_s=0.6)
    server = Server("--max-running-requests", "256", failures=failures)
    assert await server.run() == CRASH_EXIT
    assert "oom" in server.signatures()
    assert "Decode out of memory" in "\n".join(server.messages())
    assert server.seconds_ready_to_crash() < 1.5


async def test_a_good_configuration_keeps_serving() -> None:
    server = Server("--speculative-num-draft-tokens", "8", failures=FailureTiming(), run_s=1.0)
    assert await server.run() is None
    assert server.signatures() == set()
    assert server.decode_batches_after_ready() > 10


def test_the_testbed_sets_the_timeline_through_the_units_environment() -> None:
    env = {"SPECOPS_SIM_GRAPH_CRASH": "batches", "SPECOPS_SIM_CUBLAS_AFTER_S": "20"}
    assert failure_timing_from_env(env) == FailureTiming(graph_crash="batches", cublas_after_s=20)
    with pytest.raises(SystemExit, match="SPECOPS_SIM_GRAPH_CRASH"):
        failure_timing_from_env({"SPECOPS_SIM_GRAPH_CRASH": "later"})
    with pytest.raises(SystemExit, match="SPECOPS_SIM_REQUESTS"):
        failure_timing_from_env({"SPECOPS_SIM_REQUESTS": "many"})
