"""When a simulated server dies: the real incident timeline, with timings tests can shrink.

A crash is not one event at start-up. On the B300 (sm_103) a DDTree budget > 8 with CUDA
graphs fails *either* during graph capture *or* a few decode batches after the server said it
was ready (`CUDA error: an illegal memory access was encountered` in
`cuda_graph_runner.replay`, then `SIGQUIT received`, then SGLang's kill_process_tree: systemd
sees `status=9/KILL`). Other settings fail minutes later: cuBLAS
(`CUBLAS_STATUS_EXECUTION_FAILED`) once more than 128 requests have been running for a while
(max running 256 under 200 requests), and OOM once the KV cache fills. A rollout that stops
watching at the first decode line passes all of those as good; this module is what makes the
simulated fleet and the testbed hosts fail that way, so the soak window is tested against it.

`FailureTiming` holds the knobs (seconds, not minutes, in tests); `FailurePlan` answers the
server's questions: crash in capture? which decode batch crashes? and the lines it logs.
On the testbed the knobs come from the unit's environment (`failure_timing_from_env`).
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass, fields

GRAPH_CRASH_MODES = ("capture", "batches", "either")

KV_POOL_TOKENS = 1933682
"""The simulated KV pool at the default `--mem-fraction-static` (0.88)."""
DEFAULT_MEM_FRACTION = 0.88


@dataclass(frozen=True)
class FailureTiming:
    """How and when a crashing configuration fails (every field settable from the unit's env)."""

    graph_crash: str = "capture"
    """Budget > 8 with CUDA graphs fails "capture" (in graph capture), "batches" (some decode
    batches after ready) or "either" (one of the two, at random, as on the B300)."""
    crash_batches: int = 0
    """With "batches": the decode batch after ready that crashes; 0 draws it from 2–6."""
    requests: int = 48
    """Concurrent requests the clients offer; `#running-req` is at most max running."""
    cublas_running: int = 128
    """More running requests than this, held for `cublas_after_s`, fail in cuBLAS."""
    cublas_after_s: float = 120.0
    request_tokens: int = 8192
    """KV tokens one running request holds once its context is full."""
    kv_fill_s: float = 600.0
    """Seconds after ready for the requests' contexts to reach `request_tokens`."""

    def __post_init__(self) -> None:
        if self.graph_crash not in GRAPH_CRASH_MODES:
            raise ValueError(f"graph_crash must be one of {', '.join(GRAPH_CRASH_MODES)}")
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, int | float) and value < 0:
                raise ValueError(f"{f.name} must not be negative")


ENV_PREFIX = "SPECOPS_SIM_"
"""`SPECOPS_SIM_GRAPH_CRASH=batches`, `SPECOPS_SIM_CUBLAS_AFTER_S=20`, … (field names, upper)."""


def failure_timing_from_env(env: Mapping[str, str]) -> FailureTiming:
    """FailureTiming from `SPECOPS_SIM_<FIELD>` variables; unset ones keep the defaults."""
    default = FailureTiming()
    values: dict[str, object] = {}
    for f in fields(FailureTiming):
        name = ENV_PREFIX + f.name.upper()
        text = env.get(name, "").strip()
        if not text:
            continue
        kind = type(getattr(default, f.name))
        try:
            values[f.name] = kind(text)
            FailureTiming(**{f.name: values[f.name]})  # type: ignore[arg-type]
        except ValueError as exc:
            raise SystemExit(f"{name}={text!r}: {exc}") from None
    return FailureTiming(**values)  # type: ignore[arg-type]


_TRACEBACK_HEAD = (
    "Scheduler hit an exception: Traceback (most recent call last):\n"
    '  File "/opt/sglang/python/sglang/srt/managers/scheduler.py", line 2769, '
    "in run_scheduler_process\n"
    "    scheduler.event_loop_overlap()\n"
)
_CUDA_TAIL = (
    "CUDA kernel errors might be asynchronously reported at some other API call, "
    "so the stacktrace below might be incorrect.\n"
    "For debugging consider passing CUDA_LAUNCH_BLOCKING=1\n"
    "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions."
)
SIGQUIT_RUNNING = (
    "SIGQUIT received. signum=3, frame=None. It usually means one child failed.\n"
    "Dumping requests before crash. self.crash_dump_folder=None"
)
"""The tokenizer manager's handler once the server runs (the launch-time one differs)."""


def replay_crash() -> str:
    """The illegal memory access a few decode batches after ready, in graph replay."""
    return (
        _TRACEBACK_HEAD
        + '  File "/opt/sglang/python/sglang/srt/model_executor/cuda_graph_runner.py", '
        "line 731, in replay\n"
        "    self.graphs[self.bs].replay()\n"
        "torch.AcceleratorError: CUDA error: an illegal memory access was encountered\n"
        + _CUDA_TAIL
    )


def cublas_crash() -> str:
    return (
        _TRACEBACK_HEAD
        + '  File "/opt/sglang/python/sglang/srt/layers/linear.py", line 1312, in forward\n'
        "    output = torch.matmul(input_, self.weight.t())\n"
        "RuntimeError: CUDA error: CUBLAS_STATUS_EXECUTION_FAILED when calling "
        "`cublasGemmEx( handle, opa, opb, m, n, k, &falpha, a, CUDA_R_16BF, lda, b, CUDA_R_16BF, "
        "ldb, &fbeta, c, CUDA_R_16BF, ldc, compute_type, CUBLAS_GEMM_DEFAULT_TENSOR_OP)`"
    )


def oom_crash(tokens: int) -> str:
    return (
        _TRACEBACK_HEAD + '  File "/opt/sglang/python/sglang/srt/mem_cache/common.py", line 388, '
        "in alloc_for_decode\n"
        "    raise RuntimeError(error_msg)\n"
        "RuntimeError: Decode out of memory. Try to lower your batch size.\n"
        f"Try to allocate {tokens} tokens.\n"
        "Available tokens: 0"
    )


@dataclass(frozen=True)
class Load:
    """What one decode batch runs."""

    running: int
    tokens: int
    capacity: int


class FailurePlan:
    """One server's fate, decided from its configuration when it starts."""

    def __init__(
        self,
        timing: FailureTiming,
        *,
        budget: int,
        cuda_graph: bool,
        max_running: int,
        mem_fraction: float | None,
        rng: random.Random,
    ) -> None:
        self.timing = timing
        self.rng = rng
        self.max_running = max_running
        fraction = mem_fraction if mem_fraction is not None else DEFAULT_MEM_FRACTION
        self.capacity = int(KV_POOL_TOKENS * fraction / DEFAULT_MEM_FRACTION)
        self.graph_bug = cuda_graph and budget > 8
        mode = timing.graph_crash
        if mode == "either":
            mode = rng.choice(("capture", "batches"))
        self.crash_in_capture = self.graph_bug and mode == "capture"
        self.crash_batch: int | None = None
        if self.graph_bug and mode == "batches":
            self.crash_batch = timing.crash_batches or rng.randint(2, 6)
        self._busy_since: float | None = None
        """Seconds after ready when more than `cublas_running` requests began to run."""

    def load(self, since_ready_s: float) -> Load:
        """The batch's running requests and KV tokens, `since_ready_s` after ready."""
        offered = min(self.max_running, self.timing.requests)
        running = max(1, round(offered * self.rng.uniform(0.85, 1.0)))
        fill_s = self.timing.kv_fill_s
        fill = 1.0 if fill_s <= 0 else min(1.0, since_ready_s / fill_s)
        per_request = 600 + (self.timing.request_tokens - 600) * fill
        return Load(running, int(running * max(600.0, per_request)), self.capacity)

    def crash_after_batch(self, batch: int, load: Load, since_ready_s: float) -> str | None:
        """The traceback that ends the server after decode batch `batch` (1-based, logged
        `since_ready_s` after ready), or None while it survives."""
        if self.crash_batch is not None and batch >= self.crash_batch:
            return replay_crash()
        if load.tokens > load.capacity:
            return oom_crash(load.tokens - load.capacity)
        if load.running <= self.timing.cublas_running:
            self._busy_since = None
            return None
        if self._busy_since is None:
            self._busy_since = since_ready_s
        if since_ready_s - self._busy_since >= self.timing.cublas_after_s:
            return cublas_crash()
        return None
