"""The journal excerpt keeps every crash with its context, however far back, and marks gaps."""

from __future__ import annotations

import json

from console.hosts.events import JournalEntry
from console.package.excerpt import build_excerpt
from console.watch.journal import decode_lines

CRASH = "torch.AcceleratorError: CUDA error: an illegal memory access was encountered"
T0 = 1_764_669_600  # 2025-12-02T10:00:00Z


def entries(messages: list[str], n_dropped: dict[int, int] | None = None) -> list[JournalEntry]:
    """The entries journalctl -o json prints for these lines, one second apart."""
    lines = []
    for i, message in enumerate(messages):
        data = {
            "__CURSOR": f"s=abc;i={i:x}",
            "__REALTIME_TIMESTAMP": str((T0 + i) * 1_000_000),
            "MESSAGE": message,
            "_PID": "4007",
            "_SYSTEMD_INVOCATION_ID": "a" * 32,
        }
        if n_dropped and i in n_dropped:
            data["MESSAGE_ID"] = "a596d6fe7bfa4994828e72309e95d61e"
            data["N_DROPPED"] = str(n_dropped[i])
            data["_PID"] = "1"
        lines.append(json.dumps(data))
    return decode_lines("b300", lines)


def sglang(i: int, text: str) -> str:
    return f"[2025-12-02 10:00:{i:02d} TP0] {text}"


def journal() -> list[JournalEntry]:
    lines = [sglang(0, "Load weight begin. avail mem=176.44 GB")]
    lines += [sglang(i, f"Prefill batch, #new-seq: {i}") for i in range(1, 11)]
    lines += [
        sglang(11, "Capture cuda graph begin. This can take up to several minutes."),
        sglang(12, "Scheduler hit an exception: Traceback (most recent call last):"),
        '  File "cuda_graph_runner.py", line 412, in capture',
        CRASH,
    ]
    lines += [
        sglang(15 + i, f"Decode batch, #running-req: 9, accept len: 4.{i}") for i in range(10)
    ]
    return entries(lines)


def excerpt(entries: list[JournalEntry], limit: int = 3, context: int = 2) -> str:
    return build_excerpt(
        entries,
        host="b300",
        unit="sglang-k26-ddtree.service",
        command="journalctl -u sglang-k26-ddtree.service -o json '--since=4 hours ago'",
        since="4 hours ago",
        patterns=["accept len"],
        context=context,
        limit=limit,
    ).text


def body(text: str) -> list[str]:
    return [line for line in text.splitlines() if not line.startswith("# ")]


def stamp(i: int) -> str:
    return f"2025-12-02T10:00:{i:02d}.000Z [4007] "


def test_a_crash_keeps_its_traceback_and_context_even_beyond_the_last_n_matches() -> None:
    result = build_excerpt(
        journal(),
        host="b300",
        unit="u.service",
        command="journalctl -u u.service",
        since="4 hours ago",
        patterns=["accept len"],
        context=2,
        limit=3,
    )
    assert result.crashes == ("illegal_memory_access",)
    assert result.entries_read == 25 and result.records_kept == 8
    assert result.first_cursor == "s=abc;i=0" and result.last_cursor == "s=abc;i=18"
    assert body(result.text) == [
        "-- 10 records not shown --",
        stamp(10) + sglang(10, "Prefill batch, #new-seq: 10"),
        stamp(11) + sglang(11, "Capture cuda graph begin. This can take up to several minutes."),
        "-- crash signature: illegal_memory_access --",
        stamp(12) + sglang(12, "Scheduler hit an exception: Traceback (most recent call last):"),
        '      File "cuda_graph_runner.py", line 412, in capture',
        f"    {CRASH}",
        stamp(15) + sglang(15, "Decode batch, #running-req: 9, accept len: 4.0"),
        stamp(16) + sglang(16, "Decode batch, #running-req: 9, accept len: 4.1"),
        "-- 5 records not shown --",
        stamp(22) + sglang(22, "Decode batch, #running-req: 9, accept len: 4.7"),
        stamp(23) + sglang(23, "Decode batch, #running-req: 9, accept len: 4.8"),
        stamp(24) + sglang(24, "Decode batch, #running-req: 9, accept len: 4.9"),
    ]


def test_the_header_says_what_was_read_and_how_it_was_filtered() -> None:
    header = [line for line in excerpt(journal()).splitlines() if line.startswith("# ")]
    assert header[1] == (
        "# read with: journalctl -u sglang-k26-ddtree.service -o json '--since=4 hours ago'"
    )
    assert header[2].startswith("# read 25 journal entries (23 records")
    assert header[3].endswith("cursor s=abc;i=0 … s=abc;i=18")
    assert "the last 3 that match" in header[4]
    assert "2 records either side of every crash signature" in header[5]
    assert header[-2].endswith(
        "--since '4 hours ago' -o short-iso | grep -E 'accept len' | tail -n 3"
    )
    assert header[-1] == "# crash signatures: illegal_memory_access ×1"


def test_journald_gap_notices_are_always_kept() -> None:
    found = entries(
        [sglang(0, "filler"), "Suppressed 12 messages from u.service", sglang(2, "x")],
        n_dropped={1: 12},
    )
    assert body(excerpt(found)) == [
        "-- 1 records not shown --",
        "2025-12-02T10:00:01.000Z [1] Suppressed 12 messages from u.service",
        "-- 1 records not shown --",
    ]


def test_the_same_journal_gives_the_same_bytes_and_an_empty_one_says_so() -> None:
    assert excerpt(journal()) == excerpt(journal())
    empty = excerpt([])
    assert "cursor - … -" in empty
    assert body(empty) == []


def test_a_start_up_traceback_without_a_signature_is_kept_with_its_context() -> None:
    lines = [sglang(i, f"Decode batch, #running-req: 9, accept len: 4.{i}") for i in range(8)]
    lines += [
        "Traceback (most recent call last):",
        '  File "/opt/sglang/python/sglang/launch_server.py", line 11, in <module>',
        "ModuleNotFoundError: No module named 'sgl_kernel'",
    ]
    lines += [sglang(11 + i, f"Decode batch, #running-req: 9, accept len: 5.{i}") for i in range(8)]
    text = excerpt(entries(lines), limit=2, context=1)
    assert "ModuleNotFoundError: No module named 'sgl_kernel'" in text
    assert "launch_server.py" in text
    assert sglang(7, "Decode batch, #running-req: 9, accept len: 4.7") in text  # its context
