"""SGLang line parsing against every line version in `reference/sglang.md` §1, §2 and §6.

The example lines are copied verbatim (trailing `", "` included): a parser that only passes on
lines we typed ourselves proves little.
"""

from __future__ import annotations

import timeit

import pytest
from hypothesis import given
from hypothesis import strategies as st

from console.hosts.profiles import MetricPattern
from console.watch.sglang import (
    DecodeBatch,
    DraftRunnerInit,
    GraphCapture,
    Header,
    KVCacheAllocated,
    PrefillBatch,
    ServerArgsLine,
    ServerReady,
    WeightLoad,
    has_header,
    parse_header,
    parse_line,
)
from console.watch.signatures import CRASH_SIGNATURES, CustomMetrics, crash_signature

# --- §1.4, verbatim ---------------------------------------------------------------------------

DECODE_DP0 = (
    "[2025-05-31 18:31:21 DP0 TP0] Decode batch. #running-req: 8, #token: 37217, token usage: "
    "0.13, accept len: 2.90, cuda graph: True, gen throughput (token/s): 171.01, #queue-req: 0"
)
DECODE_DP6 = (
    "[2025-05-31 18:31:21 DP6 TP6] Decode batch. #running-req: 8, #token: 36267, token usage: "
    "0.12, accept len: 2.86, cuda graph: True, gen throughput (token/s): 168.28, #queue-req: 0"
)
PREFILL_2025_10 = (
    "[2025-10-22 10:27:56 TP0] Prefill batch. #new-seq: 1, #new-token: 28, #cached-token: 0, "
    "token usage: 0.00, #running-req: 0, #queue-req: 0, "
)
DECODE_2025_10 = (
    "[2025-10-22 10:27:57 TP0] Decode batch. #running-req: 1, #token: 186, token usage: 0.00, "
    "accept len: 1.95, accept rate: 0.49, cuda graph: True, gen throughput (token/s): 178.86, "
    "#queue-req: 0, "
)
DECODE_2025_11 = (
    "[2025-11-11 04:06:27] Decode batch, #running-req: 46, #token: 34901, token usage: 0.19, "
    "cuda graph: False, gen throughput (token/s): 1447.08, #queue-req: 0, "
)
DECODE_2026_04 = (
    "[2026-04-05 20:02:51] Decode batch, #running-req: 32, #token: 11179, token usage: 0.08, "
    "cuda graph: True, gen throughput (token/s): 1635.11, #queue-req: 0"
)
PREFILL_2026_04 = (
    "[2026-04-05 20:02:51] Prefill batch, #new-seq: 1, #new-token: 158, #cached-token: 0, "
    "token usage: 0.08, #running-req: 31, #queue-req: 0, cuda graph: True, "
    "input throughput (token/s): 559.53"
)
PREFILL_NPU = (
    "[2026-07-21 15:00:13 TP0 EP0] Prefill batch, #new-seq: 8, #new-token: 54400, "
    "#cached-token: 482304, token usage: 0.66, #running-req: 16, #queue-req: 2, "
    "#pending-token: 0, npu graph: False, input throughput (token/s): 2793.64"
)
DECODE_NPU = (
    "[2026-07-21 15:00:13 TP0 EP0] Decode batch, #running-req: 24, #token: 233600, token usage: "
    "0.66, accept len: 3.05, accept rate: 0.68, npu graph: True, gen throughput (token/s): "
    "239.06, #queue-req: 2"
)
DECODE_PD = (
    "[2026-08-14 14:02:47 TP0] Decode batch, #running-req: 3, #token: 266624, token usage: 0.43, "
    "accept len: 1.67, accept rate: 0.13, pre-allocated usage: 0.22, #prealloc-req: 0, "
    "#transfer-req: 1, #retracted-req: 0, cuda graph: True, gen throughput (token/s): 183.10, "
    "#queue-req: 0"
)
UVICORN = '[2026-08-14 14:02:50] INFO:     127.0.0.1:52024 - "GET /metrics HTTP/1.1" 200 OK'

JOURNAL = "Jun 01 12:00:00 gpu-host python3[12345]: "


def _decode(line: str) -> DecodeBatch:
    parsed = parse_line(line)
    assert isinstance(parsed, DecodeBatch), parsed
    return parsed


def _prefill(line: str) -> PrefillBatch:
    parsed = parse_line(line)
    assert isinstance(parsed, PrefillBatch), parsed
    return parsed


def test_mtp_dp_attention_decode_lines() -> None:
    first, second = _decode(DECODE_DP0), _decode(DECODE_DP6)
    assert first == DecodeBatch(
        header=Header("2025-05-31 18:31:21", (("DP", 0), ("TP", 0))),
        running_req=8,
        queue_req=0,
        gen_throughput=171.01,
        token=37217,
        token_usage=0.13,
        accept_len=2.90,
        graph_backend="cuda",
        graph=True,
        fields=first.fields,
    )
    assert second.header == Header("2025-05-31 18:31:21", (("DP", 6), ("TP", 6)))
    assert (second.token, second.accept_len, second.gen_throughput) == (36267, 2.86, 168.28)
    assert first.accept_rate is None


def test_decode_with_accept_rate_and_trailing_comma() -> None:
    line = _decode(DECODE_2025_10)
    assert DECODE_2025_10.endswith(", ")
    assert (line.running_req, line.token, line.token_usage) == (1, 186, 0.0)
    assert (line.accept_len, line.accept_rate) == (1.95, 0.49)
    assert (line.graph, line.gen_throughput, line.queue_req) == (True, 178.86, 0)


def test_decode_comma_form_without_spec_or_ranks() -> None:
    old = _decode(DECODE_2025_11)
    assert old.header == Header("2025-11-11 04:06:27")
    assert (old.running_req, old.token, old.graph, old.gen_throughput) == (
        46,
        34901,
        False,
        1447.08,
    )
    assert old.accept_len is None and old.accept_rate is None
    new = _decode(DECODE_2026_04)
    assert (new.running_req, new.token, new.token_usage) == (32, 11179, 0.08)
    assert (new.graph, new.gen_throughput, new.queue_req) == (True, 1635.11, 0)


def test_decode_npu_graph_and_two_ranks() -> None:
    line = _decode(DECODE_NPU)
    assert line.header is not None and line.header.label == "TP0 EP0"
    assert (line.graph_backend, line.graph) == ("npu", True)
    assert (line.accept_len, line.accept_rate, line.queue_req) == (3.05, 0.68, 2)


def test_decode_pd_disaggregation_fields() -> None:
    line = _decode(DECODE_PD)
    assert line.preallocated_usage == 0.22
    assert line.field("#transfer-req") == 1
    assert line.field("#retracted-req") == 0
    assert (line.accept_len, line.graph, line.gen_throughput) == (1.67, True, 183.10)


def test_prefill_trailing_comma_form() -> None:
    line = _prefill(PREFILL_2025_10)
    assert (line.new_seq, line.new_token, line.cached_token) == (1, 28, 0)
    assert (line.token_usage, line.running_req, line.queue_req) == (0.0, 0, 0)
    assert line.graph is None and line.input_throughput is None and line.pending_token is None


def test_prefill_with_graph_and_input_throughput() -> None:
    line = _prefill(PREFILL_2026_04)
    assert (line.new_token, line.running_req, line.graph) == (158, 31, True)
    assert line.input_throughput == 559.53
    npu = _prefill(PREFILL_NPU)
    assert (npu.new_seq, npu.new_token, npu.cached_token) == (8, 54400, 482304)
    assert (npu.pending_token, npu.graph_backend, npu.graph) == (0, "npu", False)
    assert npu.input_throughput == 2793.64
    assert npu.header == Header("2026-07-21 15:00:13", (("TP", 0), ("EP", 0)))


def test_uvicorn_access_line_is_not_a_stats_line() -> None:
    assert parse_line(UVICORN) is None
    assert parse_header(UVICORN) == Header("2026-08-14 14:02:50")
    assert crash_signature(UVICORN) is None


# --- §1.3, each format version --------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        pytest.param(
            "[2025-01-10 10:00:00 TP0] Decode batch. #running-req: 2, #token: 300, "
            "token usage: 0.00, accept len: 2.10, gen throughput (token/s): 55.50, #queue-req: 1",
            (2, 300, 2.10, None, None, 55.50, 1),
            id="v0.4.1-period-no-graph",
        ),
        pytest.param(
            "[2025-03-03 10:00:00] Decode batch. #running-req: 2, #token: 300, token usage: 0.01, "
            "largest-len: 0, gen throughput (token/s): 55.50, #queue-req: 0",
            (2, 300, None, None, None, 55.50, 0),
            id="v0.4.3-largest-len",
        ),
        pytest.param(
            "[2025-05-12 10:00:00] Decode batch. #running-req: 2, #token: 300, token usage: 0.01, "
            "accept len: 3.00, cuda graph: False, gen throughput (token/s): 55.50, #queue-req: 0",
            (2, 300, 3.0, None, False, 55.50, 0),
            id="v0.4.6-graph",
        ),
        pytest.param(
            "[2025-08-01 10:00:00] Decode batch. #running-req: 2, #token: 300, token usage: 0.01, "
            "cuda graph: True, gen throughput (token/s): 55.50, #queue-req: 0, ",
            (2, 300, None, None, True, 55.50, 0),
            id="2025-07-trailing-comma",
        ),
        pytest.param(
            "[2025-10-23 10:00:00] Decode batch [4000], #running-req: 2, #token: 300, "
            "token usage: 0.01, accept len: 3.00, accept rate: 0.50, cuda graph: True, "
            "gen throughput (token/s): 55.50, #queue-req: 0, ",
            (2, 300, 3.0, 0.5, True, 55.50, 0),
            id="2025-10-23-iteration",
        ),
        pytest.param(
            "[2025-10-26 10:00:00] Decode batch, #running-req: 2, #token: 300, token usage: 0.01, "
            "accept len: 3.00, accept rate: 0.50, cuda graph: True, "
            "gen throughput (token/s): 55.50, #queue-req: 0, ",
            (2, 300, 3.0, 0.5, True, 55.50, 0),
            id="v0.5.4-comma",
        ),
        pytest.param(
            "[2026-02-01 10:00:00] Decode batch, #running-req: 2, #token: 300, token usage: 0.01, "
            "accept len: 3.00, accept rate: 0.50, cuda graph: True, "
            "gen throughput (token/s): 55.50, #queue-req: 0",
            (2, 300, 3.0, 0.5, True, 55.50, 0),
            id="2026-01-30-no-trailing-comma",
        ),
        pytest.param(
            "[2026-06-01 10:00:00 TP0] Decode batch [17], #running-req: 2, #token: 300, "
            "token usage: 0.01, accept len: 4.36, accept rate: 0.21, musa graph: False, "
            "gen throughput (token/s): 55.50, #queue-req: 3",
            (2, 300, 4.36, 0.21, False, 55.50, 3),
            id="forward-iters-musa",
        ),
    ],
)
def test_decode_format_versions(
    line: str, expected: tuple[int, int, float | None, float | None, bool | None, float, int]
) -> None:
    parsed = _decode(line)
    got = (
        parsed.running_req,
        parsed.token,
        parsed.accept_len,
        parsed.accept_rate,
        parsed.graph,
        parsed.gen_throughput,
        parsed.queue_req,
    )
    assert got == expected


def test_iteration_number() -> None:
    assert (
        _decode(
            "Decode batch [4000], #running-req: 1, gen throughput (token/s): 1, #queue-req: 0"
        ).iteration
        == 4000
    )
    assert _decode(DECODE_2026_04).iteration is None


def test_swa_usage_variant() -> None:
    line = _decode(
        "[2026-03-01 10:00:00 TP0] Decode batch, #running-req: 4, #full token: 1200, "
        "full token usage: 0.10, #swa token: 800, swa token usage: 0.30, accept len: 2.50, "
        "accept rate: 0.40, cuda graph: True, gen throughput (token/s): 99.00, #queue-req: 0"
    )
    assert (line.token, line.token_usage) == (1200, 0.10)
    assert (line.field("#swa token"), line.field("swa token usage")) == (800, 0.30)
    assert line.accept_len == 2.50


def test_mamba_and_hisparse_usage_variants() -> None:
    mamba = _decode(
        "[2026-03-01 10:00:00] Decode batch, #running-req: 4, #token: 1200, token usage: 0.10, "
        "mamba num: 6, mamba usage: 0.05, cuda graph: True, gen throughput (token/s): 99.00, "
        "#queue-req: 0"
    )
    assert (mamba.token, mamba.field("mamba num"), mamba.field("mamba usage")) == (1200, 6, 0.05)
    hisparse = _decode(
        "[2026-03-01 10:00:00] Decode batch, #running-req: 4, #gpu token: 512, "
        "gpu token usage: 0.20, #cpu token: 4096, cpu token usage: 0.70, cuda graph: True, "
        "gen throughput (token/s): 99.00, #queue-req: 0"
    )
    assert (hisparse.token, hisparse.token_usage) == (512, 0.20)
    assert hisparse.field("cpu token usage") == 0.70


def test_mfu_and_fwd_occupancy_tails() -> None:
    line = _decode(
        "[2026-09-01 10:00:00 TP0] Decode batch, #running-req: 4, #token: 1200, token usage: 0.10, "
        "accept len: 3.10, accept rate: 0.30, cuda graph: True, gen throughput (token/s): 99.00, "
        "#queue-req: 5, est. decode TFLOPS/s (per GPU): 120.50, est. read BW (GB/s per GPU): "
        "3000.25, est. write BW (GB/s per GPU): 12.75, fwd occupancy: 87.50%"
    )
    assert (line.queue_req, line.gen_throughput) == (5, 99.0)
    assert line.field("est. decode TFLOPS/s (per GPU)") == 120.50
    assert line.field("est. read BW (GB/s per GPU)") == 3000.25
    assert line.field("est. write BW (GB/s per GPU)") == 12.75
    assert line.fwd_occupancy == 87.50


def test_old_prefill_with_cache_hit_rate() -> None:
    line = _prefill(
        "Prefill batch. #new-seq: 1, #new-token: 28, #cached-token: 0, cache hit rate: 0.00%, "
        "token usage: 0.00, #running-req: 0, #queue-req: 0"
    )
    assert (line.new_seq, line.new_token, line.cache_hit_rate_pct, line.header) == (
        1,
        28,
        0.0,
        None,
    )


def test_prefill_pd_fields_and_iteration() -> None:
    line = _prefill(
        "[2026-05-01 10:00:00 TP0] Prefill batch [12], #new-seq: 2, #new-token: 100, "
        "#cached-token: 10, token usage: 0.10, #running-req: 1, #queue-req: 0, "
        "#pending-token: 40, #bootstrap-req: 1, #inflight-req: 2, cuda graph: False, "
        "input throughput (token/s): 1000.00"
    )
    assert (line.iteration, line.pending_token, line.field("#inflight-req")) == (12, 40, 2)


def test_a_decode_line_ending_at_gen_throughput_keeps_its_accept_length() -> None:
    """Issue 16's report; no released wheel prints it (every one ends with `#queue-req`)."""
    line = _decode(
        "[2026-01-01 00:00:00 TP0] Decode batch, #running-req: 3, #token: 2000, token usage: "
        "0.01, accept len: 6.40, accept rate: 0.36, cuda graph: True, gen throughput (token/s): "
        "410.00"
    )
    assert (line.accept_len, line.gen_throughput, line.queue_req) == (6.40, 410.0, None)


def test_cut_off_batch_lines_keep_what_they_carry() -> None:
    decode = _decode("[2026-01-01 00:00:00] Decode batch, #running-req: 1, #token: 5")
    assert (decode.running_req, decode.token, decode.gen_throughput) == (1, 5, None)
    prefill = parse_line("Prefill batch, #new-seq: 1")
    assert isinstance(prefill, PrefillBatch) and prefill.new_seq == 1
    assert prefill.running_req is None
    assert parse_line("a traceback mentioning Decode batch somewhere") is None
    assert parse_line("[2026-01-01 00:00:00] Decode batch, ") is None


# --- Headers, prefixes, continuation --------------------------------------------------------


@pytest.mark.parametrize(
    ("ranks", "expected"),
    [
        ("", ()),
        (" TP3", (("TP", 3),)),
        (
            " DP0 PP0 ATTN_CP0 MOE_DP0 TP0 EP0",
            tuple((k, 0) for k in ("DP", "PP", "ATTN_CP", "MOE_DP", "TP", "EP")),
        ),
        (" PP1 TP2", (("PP", 1), ("TP", 2))),
        (" EP7 TP3 DP1", (("EP", 7), ("TP", 3), ("DP", 1))),
        (" ATTN_CP2 MOE_DP3", (("ATTN_CP", 2), ("MOE_DP", 3))),
    ],
)
def test_rank_prefixes_in_any_order_and_subset(
    ranks: str, expected: tuple[tuple[str, int], ...]
) -> None:
    line = (
        f"[2026-04-05 20:02:51{ranks}] Decode batch, #running-req: 1, gen "
        f"throughput (token/s): 2.00, #queue-req: 0"
    )
    parsed = _decode(line)
    assert parsed.header == Header("2026-04-05 20:02:51", expected)
    assert has_header(line)


def test_header_helpers() -> None:
    header = parse_header("[2026-07-21 15:00:13.123 DP1 ATTN_CP2 TP3] x")
    assert header is not None
    assert header.timestamp == "2026-07-21 15:00:13.123"
    assert (header.rank("DP"), header.rank("ATTN_CP"), header.rank("TP"), header.rank("EP")) == (
        1,
        2,
        3,
        None,
    )
    assert header.label == "DP1 ATTN_CP2 TP3"
    assert header.time().microsecond == 123000
    assert Header("2026-07-21 15:00:13").time().second == 13
    assert parse_header("no header here") is None
    assert parse_header("[not a header] x") is None


def test_milliseconds_timestamp() -> None:
    line = _decode("[2026-04-05 20:02:51.042 TP0] " + DECODE_2026_04.split("] ", 1)[1])
    assert line.header == Header("2026-04-05 20:02:51.042", (("TP", 0),))


@pytest.mark.parametrize(
    "prefix",
    [
        JOURNAL,
        "Jun  1 12:00:00 gpu-host python3[12345]: ",
        "2026-06-01T12:00:00+0000 gpu-host sglang[77]: ",
        "(Worker pid=4242, ip=10.0.0.7) ",
        "(SchedulerActor pid=4242) ",
        JOURNAL + "(Worker pid=4242 ip=10.0.0.7) ",
    ],
)
def test_prefixed_lines_parse_and_start_records(prefix: str) -> None:
    line = _decode(prefix + DECODE_NPU)
    assert line.header == Header("2026-07-21 15:00:13", (("TP", 0), ("EP", 0)))
    assert (line.accept_len, line.gen_throughput) == (3.05, 239.06)
    assert has_header(prefix + DECODE_NPU)
    assert has_header(prefix + UVICORN)


@pytest.mark.parametrize(
    "line",
    [
        '  File ".../sglang/srt/managers/scheduler.py", line 2769, in run_scheduler_process',
        "RuntimeError: CUDA error: an illegal memory access was encountered",
        "For debugging consider passing CUDA_LAUNCH_BLOCKING=1",
        JOURNAL + "Traceback (most recent call last):",
        (
            "Capturing batches (bs=1 avail_mem=72.47 GB): 100%|██████████| 2/2 "
            "[00:02<00:00,  1.10s/it]"
        ),
        " [2026-04-05 20:02:51] indented",
        "",
        "x [2026-04-05 20:02:51] header not at the start",
    ],
)
def test_headerless_lines_are_continuations(line: str) -> None:
    assert not has_header(line)


def test_sglang_header_is_required_after_journal_prefix() -> None:
    assert has_header(JOURNAL + "[2025-07-25 07:53:08 TP2] Scheduler hit an exception: Traceback")
    assert not has_header(JOURNAL + "    raise RuntimeError(x)")


# --- §2.1 / §2.2 startup lines ---------------------------------------------------------------

CAPTURE_LINES = [
    (
        "[2026-07-21 08:21:55 TP0] Capture target verify CUDA graph begin. "
        "backend=full, num_tokens_per_bs=6, bs=[1, 2, 3, 4, 5, 6], avail "
        "mem=7.77 GB"
    ),
    (
        "[2026-07-21 08:22:00 TP0] Capture target verify CUDA graph end. "
        "elapsed=4.56 s, mem usage=0.38 GB, avail mem=7.39 GB."
    ),
    (
        "[2026-07-21 08:22:00 TP0] Capture draft decode CUDA graph begin. "
        "backend=full, num_tokens_per_bs=1, bs=[1, 2, 3, 4, 5, 6], avail "
        "mem=7.39 GB"
    ),
    (
        "[2026-07-21 08:22:01 TP0] Capture draft extend CUDA graph begin. "
        "backend=full, num_tokens_per_bs=6, bs=[1, 2, 3, 4, 5, 6], avail "
        "mem=7.01 GB"
    ),
    (
        "[2026-08-17 16:52:13] Capture target decode CUDA graph begin. "
        "backend=full, num_tokens_per_req=1, bs=[1, 2], avail mem=73.10 GB"
    ),
    (
        "[2026-08-17 16:52:18] Capture target decode CUDA graph end. "
        "elapsed=2.58 s, mem usage=0.45 GB, avail mem=72.65 GB."
    ),
    (
        "[t] Capture target prefill CUDA graph begin. backend=breakable, "
        "num_tokens=[4, 8, 8192], avail mem=1 GB"
    ),
]


def _capture(line: str) -> GraphCapture:
    parsed = parse_line(line)
    assert isinstance(parsed, GraphCapture), parsed
    return parsed


def test_new_capture_lines() -> None:
    got = [_capture(line) for line in CAPTURE_LINES]
    assert [(c.role, c.stage, c.phase) for c in got] == [
        ("target", "verify", "begin"),
        ("target", "verify", "end"),
        ("draft", "decode", "begin"),
        ("draft", "extend", "begin"),
        ("target", "decode", "begin"),
        ("target", "decode", "end"),
        ("target", "prefill", "begin"),
    ]
    first, end = got[0], got[1]
    assert first.header == Header("2026-07-21 08:21:55", (("TP", 0),))
    assert (first.device, first.backend, first.tokens_per_bs) == ("cuda", "full", 6)
    assert (first.batch_sizes, first.avail_mem_gb) == ((1, 2, 3, 4, 5, 6), 7.77)
    assert (end.elapsed_s, end.mem_usage_gb, end.avail_mem_gb) == (4.56, 0.38, 7.39)
    assert got[4].tokens_per_bs == 1
    assert (got[6].header, got[6].backend, got[6].batch_sizes) == (None, "breakable", ())
    assert got[6].avail_mem_gb == 1.0


def test_old_capture_lines() -> None:
    begin = _capture(
        "[2025-06-01 12:00:00 TP0] Capture cuda graph begin. This can take up to several minutes. "
        "avail mem=72.00 GB"
    )
    assert (begin.role, begin.stage, begin.phase, begin.avail_mem_gb) == (None, None, "begin", 72.0)
    end = _capture(
        "[2025-06-01 12:00:30 TP0] Capture cuda graph end. Time elapsed: 30.12 s. "
        "mem usage=1.50 GB. avail mem=70.50 GB."
    )
    assert (end.phase, end.elapsed_s, end.mem_usage_gb, end.avail_mem_gb) == (
        "end",
        30.12,
        1.5,
        70.5,
    )
    draft = _capture(
        "Capture draft cuda graph end. Time elapsed: 3.00 s. mem usage=0.20 GB. avail mem=70.30 GB."
    )
    assert (draft.role, draft.stage) == ("draft", None)
    extend = _capture(
        "Capture draft extend cuda graph begin. This can take up to several "
        "minutes. avail mem=70.30 GB"
    )
    assert (extend.role, extend.stage) == ("draft", "extend")
    npu = _capture("[2026-01-01 00:00:00] Capture npu graph begin. avail mem=30.00 GB")
    assert npu.device == "npu"


@pytest.mark.parametrize(
    "line",
    [
        "[2025-06-01 12:00:00 TP0] Capture cuda graph bs [1, 2, 4, 8]",
        (
            "Capturing batches (bs=1 avail_mem=72.47 GB): 100%|██████████| 2/2 "
            "[00:02<00:00,  1.10s/it]"
        ),
        (
            "Disable prefill CUDA graph because cuda_graph_config resolved "
            "prefill.backend='disabled' (x)"
        ),
        "[2026-01-01 00:00:00 TP0] Init torch distributed begin.",
    ],
)
def test_other_startup_lines_are_ignored(line: str) -> None:
    assert parse_line(line) is None


def test_load_weight_lines() -> None:
    begin = parse_line("[2026-05-01 10:00:00 TP0] Load weight begin. avail mem=78.50 GB")
    assert begin == WeightLoad(
        Header("2026-05-01 10:00:00", (("TP", 0),)), "begin", avail_mem_gb=78.5
    )
    end = parse_line(
        "[2026-05-01 10:03:00 TP0] Load weight end. elapsed=180.25 s, "
        "type=KimiK25ForConditionalGeneration, "
        "quant=fp4, avail mem=20.10 GB, mem usage=58.40 GB."
    )
    assert isinstance(end, WeightLoad)
    assert (end.phase, end.elapsed_s, end.model_type) == (
        "end",
        180.25,
        "KimiK25ForConditionalGeneration",
    )
    assert (end.avail_mem_gb, end.mem_usage_gb) == (20.1, 58.4)


def test_kv_cache_lines() -> None:
    old = parse_line(
        "[2026-05-01 10:03:01 TP0] KV Cache is allocated. #tokens: 812345, K "
        "size: 6.20 GB, V size: 6.20 GB"
    )
    assert old == KVCacheAllocated(Header("2026-05-01 10:03:01", (("TP", 0),)), 812345, 6.2, 6.2)
    new = parse_line(
        "KV Cache is allocated. dtype: torch.bfloat16, #tokens: 1933682, KV size: 12.45 GB"
    )
    assert new == KVCacheAllocated(None, 1933682, kv_size_gb=12.45, dtype="torch.bfloat16")


def test_ready_marker() -> None:
    line = JOURNAL + "[2026-08-17 16:52:40] The server is fired up and ready to roll!"
    assert parse_line(line) == ServerReady(Header("2026-08-17 16:52:40"))


def test_server_args_line() -> None:
    line = (
        "[2026-08-17 16:50:00] server_args=ServerArgs(model_path='moonshotai/Kimi-K2.6', "
        "tp_size=8, mem_fraction_static=0.82, disable_cuda_graph=False, "
        "speculative_algorithm='DFLASH', speculative_num_draft_tokens=17, "
        "cuda_graph_bs=[1, 2, 4, 8], json_model_override_args='{\"a\": 1}', chat_template=None, "
        "lora_paths={'x': 'y, z'}, attention_backend=AttentionBackend.TRTLLM)"
    )
    parsed = parse_line(line)
    assert isinstance(parsed, ServerArgsLine)
    assert parsed.complete and parsed.header == Header("2026-08-17 16:50:00")
    assert dict(parsed.args) == {
        "model_path": "moonshotai/Kimi-K2.6",
        "tp_size": 8,
        "mem_fraction_static": 0.82,
        "disable_cuda_graph": False,
        "speculative_algorithm": "DFLASH",
        "speculative_num_draft_tokens": 17,
        "json_model_override_args": '{"a": 1}',
        "chat_template": None,
    }
    assert parsed.raw.startswith("model_path=") and parsed.raw.endswith("AttentionBackend.TRTLLM")
    assert crash_signature(line) is None


def test_server_args_cut_by_the_journal() -> None:
    parsed = parse_line(
        "[2026-08-17 16:50:00] server_args=ServerArgs(model_path='m', tp_size=8, x=[1,"
    )
    assert isinstance(parsed, ServerArgsLine)
    assert not parsed.complete
    assert dict(parsed.args) == {"model_path": "m", "tp_size": 8}


def test_dflash_and_ddtree_init_lines() -> None:
    dflash = parse_line(
        "[2026-08-17 16:51:00 TP0] Initialized DFLASH draft runner. attention_backend=fa4, "
        "model=z-lab/Kimi-K2.5-DFlash, block_size=16, draft_window_size=None, compact_cache=False"
    )
    assert isinstance(dflash, DraftRunnerInit)
    assert dflash.algorithm == "DFLASH"
    assert dict(dflash.params) == {
        "attention_backend": "fa4",
        "model": "z-lab/Kimi-K2.5-DFlash",
        "block_size": "16",
        "draft_window_size": "None",
        "compact_cache": "False",
    }
    ddtree = parse_line(
        JOURNAL + "[2026-08-17 16:51:01 TP0] Initialized DDTREE worker: budget=16, max_topk: 8"
    )
    assert isinstance(ddtree, DraftRunnerInit)
    assert ddtree.algorithm == "DDTREE"
    assert ddtree.text == "Initialized DDTREE worker: budget=16, max_topk: 8"
    assert dict(ddtree.params) == {"budget": "16", "max_topk": "8"}


# --- §2.3 crash signatures -------------------------------------------------------------------

CRASHES = [
    ("Fatal Python error: Segmentation fault", "segfault"),
    (
        "[2025-03-01 10:00:00] Health check failed. Server couldn't get a response from "
        "detokenizer for last 20 seconds. tic start time: 10:00:00. last_heartbeat time: 09:59:39",
        "health_check_failed",
    ),
    (
        "[2025-07-25 07:53:08 TP2] Scheduler hit an exception: Traceback (most recent call last):",
        "scheduler_exception",
    ),
    ("RuntimeError: CUDA error: an illegal memory access was encountered", "illegal_memory_access"),
    (
        "torch.AcceleratorError: CUDA error: an illegal memory access was encountered",
        "illegal_memory_access",
    ),
    (
        "[2025-05-23 18:02:42] Received sigquit from a child process. It "
        "usually means the child failed.",
        "sigquit",
    ),
    ("SIGQUIT received. signum=3, frame=None. It usually means one child failed.", "sigquit"),
    (
        "what():  [PG ID 2 PG GUID 3 Rank 1] Process group watchdog thread "
        "terminated with exception: CUDA error: an illegal memory access was "
        "encountered",
        "nccl_watchdog",
    ),
    (
        "RuntimeError: CUDA error: CUBLAS_STATUS_EXECUTION_FAILED when calling "
        "`cublasGemmEx( handle, opa, opb, m, n, k, &falpha, a, CUDA_R_16BF, "
        "lda, b, CUDA_R_16BF, ldb, &fbeta, c, CUDA_R_16BF, ldc, compute_type, "
        "CUBLAS_GEMM_DEFAULT_TENSOR_OP)`",
        "cublas",
    ),
    (
        "RuntimeError: CUDA error: CUBLAS_STATUS_NOT_INITIALIZED when calling "
        "`cublasCreate(handle)`",
        "cublas",
    ),
    (
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.50 "
        "GiB. GPU 0 has a total capacity of 119.61 GiB of which 2.79 GiB is "
        "free. ...",
        "oom",
    ),
    ("torch.cuda.OutOfMemoryError: CUDA out of memory.", "oom"),
    ("Not enough memory. Please try to increase --mem-fraction-static.", "oom"),
    ("RuntimeError: Decode out of memory. Try to lower your batch size.", "oom"),
    ("Scheduler watchdog timeout (self.watchdog_timeout=300, self.soft=False)", "watchdog_timeout"),
    (
        "Subprocess scheduler_0 (pid=4242) crashed with exit code -6. "
        "Triggering SIGQUIT for cleanup...",
        "subprocess_crashed",
    ),
    (
        "[2026-01-01 00:00:00 TP0] Capture cuda graph failed: CUDA error: invalid argument",
        "capture_failed",
    ),
    (
        "Capture cuda graph failed: CUDA error: an illegal memory access was encountered",
        "illegal_memory_access",
    ),
    ("RuntimeError: CUDA error: device-side assert triggered", "cuda_error"),
    (
        "torch.distributed.DistBackendError: NCCL error in: "
        "ProcessGroupNCCL.cpp:1970, unhandled cuda error",
        "nccl_error",
    ),
    (
        "[2026-01-01 00:00:00] DetokenizerManager hit an exception: Traceback "
        "(most recent call last):",
        "detokenizer_exception",
    ),
    (
        JOURNAL + "[2025-07-25 07:53:08 TP2] Scheduler hit an exception: Traceback",
        "scheduler_exception",
    ),
]


@pytest.mark.parametrize(("line", "name"), CRASHES)
def test_crash_signatures(line: str, name: str) -> None:
    assert crash_signature(line) == name


# The §2.3 traceback as journald stores it, one entry per line: only the first and the last
# lines start records, and the crash is named on the header-less line that carries it.
TRACEBACK = [
    ("[2025-07-25 07:53:08 TP2] Scheduler hit an exception: Traceback (most recent call last):",
     True, "scheduler_exception"),
    ('  File ".../sglang/srt/managers/scheduler.py", line 2769, in run_scheduler_process',
     False, None),
    ("...", False, None),
    ("RuntimeError: CUDA error: an illegal memory access was encountered",
     False, "illegal_memory_access"),
    ("CUDA kernel errors might be asynchronously reported at some other API call, so the "
     "stacktrace below might be incorrect.", False, None),
    ("For debugging consider passing CUDA_LAUNCH_BLOCKING=1", False, None),
    ("Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.", False, None),
    ("[2025-05-23 18:02:42] Received sigquit from a child process. It usually means the child "
     "failed.", True, "sigquit"),
]  # fmt: skip


@pytest.mark.parametrize("prefix", ["", JOURNAL])
def test_traceback_record(prefix: str) -> None:
    got = [
        (line, has_header(prefix + line), crash_signature(prefix + line))
        for line, _, _ in TRACEBACK
    ]
    assert got == TRACEBACK
    assert all(parse_line(prefix + line) is None for line, _, _ in TRACEBACK)


@pytest.mark.parametrize(
    "line",
    [
        (
            "[2026-01-01 00:00:00 TP0] KV cache pool is full. Retract requests. "
            "#retracted_reqs: 2, #new_tokens_gained: 512, #new_token_ratio: 0.7 -> "
            "0.9"
        ),
        "retract_decode: aborted last request abc due to OOM",
        DECODE_DP0,
        DECODE_2025_11,
        PREFILL_NPU,
        (
            "CUDA kernel errors might be asynchronously reported at some other API "
            "call, so the stacktrace below might be incorrect."
        ),
        (
            "[2026-01-01 00:00:00] SIGTERM received. signum=15 frame=None. "
            "Draining requests and shutting down..."
        ),
        "[2026-01-01 00:00:00 TP0] Memory pool end. avail mem=10.00 GB",
        (
            "server_args=ServerArgs(enable_nccl_nvls=True, watchdog_timeout=300, "
            "disable_cuda_graph=False)"
        ),
        *CAPTURE_LINES,
    ],
)
def test_not_crashes(line: str) -> None:
    assert crash_signature(line) is None


def test_every_signature_has_an_example() -> None:
    assert {name for name, _ in CRASH_SIGNATURES} == {name for _, name in CRASHES}


# --- User metrics ----------------------------------------------------------------------------


def test_custom_metrics() -> None:
    metrics = CustomMetrics(
        [
            MetricPattern(
                name="ddtree_recent_al", regex=r"DDTREE metrics .*recent_al=(?P<value>[\d.]+)"
            ),
            MetricPattern(name="ddtree_tps", regex=r"DDTREE metrics .*tps=(?P<value>[\d.]+)"),
            MetricPattern(name="maybe", regex=r"maybe=(?P<value>\w+)?"),
        ]
    )
    assert metrics.names == ("ddtree_recent_al", "ddtree_tps", "maybe")
    assert len(metrics) == 3
    line = JOURNAL + "[2026-08-17 17:00:00 TP0] DDTREE metrics step=40 recent_al=4.12 tps=812.5"
    assert metrics.match(line) == [("ddtree_recent_al", 4.12), ("ddtree_tps", 812.5)]
    assert metrics.match(DECODE_DP0) == []
    assert metrics.match("maybe=abc") == []  # not a number: skipped, not raised
    assert metrics.match("maybe=") == []  # optional group absent
    assert CustomMetrics([]).match(line) == []


# --- A generated decode line reads back to the numbers it was made from ---------------------

_RANK_NAMES = ["DP", "PP", "ATTN_CP", "MOE_DP", "TP", "EP"]
_count = st.integers(min_value=0, max_value=10**7)
_rate = st.floats(min_value=0, max_value=1, allow_nan=False).map(lambda x: round(x, 2))
_tps = st.floats(min_value=0, max_value=1e6, allow_nan=False).map(lambda x: round(x, 2))


@st.composite
def decode_lines(draw: st.DrawFn) -> tuple[str, dict[str, object]]:
    want: dict[str, object] = {}
    ranks = draw(st.lists(st.sampled_from(_RANK_NAMES), unique=True, max_size=6))
    rank_values = [(r, draw(st.integers(0, 63))) for r in ranks]
    ms = draw(st.sampled_from(["", ".007"]))
    head = "[2026-05-01 10:00:00" + ms + "".join(f" {r}{v}" for r, v in rank_values) + "]"
    prefix = draw(st.sampled_from(["", JOURNAL, "(Worker pid=9, ip=10.1.1.1) "]))
    iteration = draw(st.none() | st.integers(0, 10**6))
    sep = draw(st.sampled_from([".", ","]))
    want["header"] = Header("2026-05-01 10:00:00" + ms, tuple(rank_values))
    want["iteration"] = iteration
    parts = [f"#running-req: {(running := draw(_count))}"]
    want["running_req"] = running
    token, usage = draw(_count), draw(_rate)
    kind = draw(st.sampled_from(["plain", "swa", "mamba", "hisparse"]))
    if kind == "swa":
        parts += [f"#full token: {token}", f"full token usage: {usage:.2f}"]
        parts += [f"#swa token: {draw(_count)}", f"swa token usage: {draw(_rate):.2f}"]
    elif kind == "hisparse":
        parts += [f"#gpu token: {token}", f"gpu token usage: {usage:.2f}"]
        parts += [f"#cpu token: {draw(_count)}", f"cpu token usage: {draw(_rate):.2f}"]
    else:
        parts += [f"#token: {token}", f"token usage: {usage:.2f}"]
        if kind == "mamba":
            parts += [f"mamba num: {draw(_count)}", f"mamba usage: {draw(_rate):.2f}"]
    want["token"], want["token_usage"] = token, usage
    accept_len = draw(st.none() | st.floats(1, 64).map(lambda x: round(x, 2)))
    accept_rate = draw(st.none() | _rate) if accept_len is not None else None
    if accept_len is not None:
        parts.append(f"accept len: {accept_len:.2f}")
        if accept_rate is not None:
            parts.append(f"accept rate: {accept_rate:.2f}")
    want["accept_len"], want["accept_rate"] = accept_len, accept_rate
    if draw(st.booleans()):
        parts += [f"pre-allocated usage: {draw(_rate):.2f}", "#prealloc-req: 0", "#transfer-req: 1"]
    backend = draw(st.none() | st.sampled_from(["cuda", "npu", "cpu", "musa"]))
    graph = draw(st.booleans()) if backend is not None else None
    if backend is not None:
        parts.append(f"{backend} graph: {graph}")
    want["graph_backend"], want["graph"] = backend, graph
    tps, queue = draw(_tps), draw(_count)
    parts += [f"gen throughput (token/s): {tps:.2f}", f"#queue-req: {queue}"]
    want["gen_throughput"], want["queue_req"] = tps, queue
    if draw(st.booleans()):
        parts.append("est. decode TFLOPS/s (per GPU): 1.00")
    if draw(st.booleans()):
        parts.append(f"fwd occupancy: {draw(_rate) * 100:.2f}%")
    trailer = draw(st.sampled_from(["", ", "]))
    iter_text = "" if iteration is None else f" [{iteration}]"
    body = f"Decode batch{iter_text}{sep} " + ", ".join(parts) + trailer
    return f"{prefix}{head} {body}", want


@given(decode_lines())
def test_generated_decode_lines_round_trip(case: tuple[str, dict[str, object]]) -> None:
    line, want = case
    parsed = _decode(line)
    got = {name: getattr(parsed, name) for name in want}
    assert got == want
    assert has_header(line)
    assert crash_signature(line) is None


# --- Cost ------------------------------------------------------------------------------------


def test_ordinary_lines_are_cheap() -> None:
    # A generous bound (slow CI machines) that still catches a regex run on every line.
    line = (
        '  File "/usr/lib/python3/dist-packages/torch/nn/modules/module.py", '
        "line 1736, in _call_impl"
    )
    per_line = (
        timeit.timeit(lambda: (parse_line(line), crash_signature(line)), number=20_000) / 20_000
    )
    assert per_line < 20e-6


_GATED = [
    r"DDTREE metrics .*recent_al=(?P<value>[\d.]+)",
    r"^step (?P<value>\d+)$",
    r"\bal=(?P<value>[\d.]+)\b",
    r"(?s)x.(?P<value>\d)",
    r"(?P<value>\d+) ok$",
]
_UNGATED = [r"\Astep (?P<value>\d+)", r"(?<!x)al=(?P<value>\d)", r"al=(?P<value>\d)(?!\n)"]


@pytest.mark.parametrize("regex", _GATED + _UNGATED)
@pytest.mark.parametrize(
    "lines",
    [
        ["noise", "step 12", "more noise"],
        ["step 12 of 40", "a al=3 b", "x\n4", "40 ok", "x4"],
        ["[TP0] DDTREE metrics step=40 recent_al=4.12 tps=812.5", "al=7"],
        ["nothing here", "at all"],
        [],
    ],
)
def test_a_slice_may_match_whenever_one_of_its_lines_does(regex: str, lines: list[str]) -> None:
    """`may_match` over lines joined is never False where a line alone matches (anchors,
    word edges and DOTALL included; `\\A` and lookarounds are matched line by line)."""
    metrics = CustomMetrics([MetricPattern(name="m", regex=regex)])
    if any(metrics.match(line) for line in lines):
        assert metrics.may_match(lines)
    if regex in _UNGATED:
        assert metrics.may_match(lines)  # no gate: every line is matched alone


def test_a_flood_slice_without_custom_lines_needs_no_per_line_match() -> None:
    metrics = CustomMetrics(
        [MetricPattern(name="al", regex=r"DDTREE metrics: .*recent_al=(?P<value>[0-9.]+)")]
    )
    assert not metrics.may_match([DECODE_DP0] * 256)
    assert metrics.may_match([DECODE_DP0] * 100 + ["DDTREE metrics: recent_al=4.1"])
