"""Journal records: decoding what journalctl prints, assembling tracebacks, filtering, markers.

The decoding cases go all the way to the SGLang parser, since that is what the console does
with every entry: a coloured (byte-array) decode line must still chart its accept length.
"""

from __future__ import annotations

import json

import pytest

from console.hosts.events import JournalEntry
from console.watch import journal
from console.watch.journal import (
    MAX_CONTINUATION,
    SUPPRESSED_MESSAGE_ID,
    LineFilter,
    RecordAssembler,
    assemble,
    decode_entry,
    display_lines,
    gap_marker,
    invocation_marker,
)
from console.watch.sglang import DecodeBatch, parse_line

DECODE = (
    "[2026-07-21 15:00:13 TP0 EP0] Decode batch, #running-req: 12, #token: 15360, "
    "token usage: 0.01, accept len: 4.36, accept rate: 0.42, cuda graph: True, "
    "gen throughput (token/s): 1650.20, #queue-req: 0, "
)
JOURNAL_PREFIX = "Jun 01 12:00:00 gpu-host python3[12345]: "
INV_A, INV_B = "a" * 32, "b" * 32
PATTERNS = ("accept len", "DDTREE metrics", "cuda graph: (True|False)", "illegal", "CUBLAS")


def json_line(message: object, seq: int = 1, **fields: object) -> str:
    data: dict[str, object] = {
        "__CURSOR": f"s=abc;i={seq:x}",
        "__REALTIME_TIMESTAMP": "1767225600123456",
        "__SEQNUM": str(seq),
        "__SEQNUM_ID": "abc",
        "PRIORITY": "6",
        "_PID": "4242",
        "_SYSTEMD_INVOCATION_ID": INV_A,
        "MESSAGE": message,
    }
    data.update(fields)
    return json.dumps(data)


def entry(
    message: str, seq: int, pid: str = "4242", invocation: str | None = INV_A
) -> JournalEntry:
    line = json_line(message, seq, _PID=pid, _SYSTEMD_INVOCATION_ID=invocation or "")
    decoded = decode_entry("b300", line)
    assert decoded is not None
    return decoded


# --- decoding ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        (DECODE, DECODE),
        # journalctl sends text with non-printable bytes (colour codes) as a byte array
        (list(f"\x1b[32m{DECODE}\x1b[0m".encode()), DECODE),
        (list(DECODE.encode()), DECODE),
        # a journald `short` prefix inside the message (a relayed or re-logged line)
        (JOURNAL_PREFIX + DECODE, JOURNAL_PREFIX + DECODE),
        (list((JOURNAL_PREFIX + "\x1b[1m" + DECODE).encode()), JOURNAL_PREFIX + DECODE),
    ],
    ids=["string", "ansi-bytes", "plain-bytes", "journal-prefix", "journal-prefix-bytes"],
)
def test_decode_line_through_the_follower_decoding(message: object, expected: str) -> None:
    decoded = decode_entry("b300", json_line(message))
    assert decoded is not None
    assert decoded.message == expected
    assert (decoded.host, decoded.cursor, decoded.seq) == ("b300", "s=abc;i=1", ("abc", 1))
    assert decoded.timestamp == pytest.approx(1767225600.123456)
    assert decoded.invocation == INV_A and decoded.pid == "4242"
    parsed = parse_line(decoded.message)
    assert isinstance(parsed, DecodeBatch)
    assert (parsed.accept_len, parsed.gen_throughput, parsed.graph) == (4.36, 1650.2, True)
    assert parsed.header is not None and parsed.header.label == "TP0 EP0"
    assert decoded.crash is None


def test_non_utf8_bytes_and_null_and_repeated_fields() -> None:
    bad = decode_entry("h", json_line([0x66, 0xFF, 0x6F]))
    assert bad is not None and bad.message == "f\ufffdo"
    null = decode_entry("h", json_line(None))
    assert null is not None and "longer than journald shows" in null.message
    repeated = decode_entry("h", json_line(["one", "two"]))
    assert repeated is not None and repeated.message == "one\ntwo"


def test_notes_and_garbage_are_skipped() -> None:
    assert decode_entry("h", "-- Boot 1234 --") is None
    assert decode_entry("h", "") is None
    assert decode_entry("h", '{"MESSAGE": "no cursor"}') is None
    assert decode_entry("h", '{"__CURSOR": "x", "MESSAGE": "ok"') is None  # torn
    assert decode_entry("h", "[1, 2]") is None


def test_suppressed_notice_is_a_gap() -> None:
    notice = decode_entry(
        "h",
        json_line(
            "Suppressed 1234 messages from sglang.service",
            MESSAGE_ID=SUPPRESSED_MESSAGE_ID,
            N_DROPPED="1234",
            _PID="1",
        ),
    )
    assert notice is not None and notice.dropped == 1234
    assert display_lines(notice) == [gap_marker(1234)]
    assert "1234" in gap_marker(1234)
    unstated = decode_entry("h", json_line("Suppressed", MESSAGE_ID=SUPPRESSED_MESSAGE_ID))
    assert unstated is not None and unstated.dropped == -1
    assert LineFilter(["never matches"]).accepts(notice)


def test_crash_signature_is_decoded_per_line() -> None:
    crash = decode_entry("h", json_line("RuntimeError: CUDA error: CUBLAS_STATUS_EXECUTION_FAILED"))
    assert crash is not None and crash.crash == "cublas"


JOURNALCTL_252 = (
    '{"MESSAGE":"' + DECODE + 'seq=7","__MONOTONIC_TIMESTAMP":"28995347597",'
    '"_SYSTEMD_INVOCATION_ID":"72ba465c761a4b4988d9b1f97629b645","PRIORITY":"6",'
    '"__REALTIME_TIMESTAMP":"1796456068352011","_PID":"64","SYSLOG_IDENTIFIER":"python3",'
    '"_BOOT_ID":"9bb80c3ecdd74cee8564f98789bf1743","__CURSOR":"s=2c04640cc78b4162b2272377fa1f3314;'
    'i=30d67;b=9bb80c3ecdd74cee8564f98789bf1743;m=6c041e48d;t=661de05cf080b;x=3e0c13b8b6fd92f2"}'
)
"""A line as Debian 12's journalctl (systemd 252) writes it for the follower: no __SEQNUM or
__SEQNUM_ID (journalctl prints them from 254 on)."""


def _without(line: str, field: str) -> str:
    return json.dumps({k: v for k, v in json.loads(line).items() if k != field})


TEXT_LINE_CASES = {
    "flood": json_line(DECODE),
    "escaped-ansi": json_line(f"\x1b[32m{DECODE}\x1b[0m"),
    "del-and-c1": json_line("del \x7f c1 \x9b2J"),
    "tabs-and-quotes": json_line('tab\t"quoted" \\ back'),
    "unicode": json_line("é ✓ 🚀"),
    "empty-invocation": json_line(DECODE, _SYSTEMD_INVOCATION_ID=""),
    "no-pid": json.dumps({k: v for k, v in json.loads(json_line(DECODE)).items() if k != "_PID"}),
    "bad-priority": json_line(DECODE, PRIORITY="x"),
    "bad-realtime": json_line(DECODE, __REALTIME_TIMESTAMP="soon"),
    "number-types": json_line(DECODE, PRIORITY=6, __SEQNUM=5),
    "no-seqnum-id": json_line(DECODE, __SEQNUM_ID=None),
    "journalctl-252": JOURNALCTL_252,
    "no-seqnum": _without(json_line(DECODE), "__SEQNUM"),
    "no-seqnum-id-field": _without(json_line(DECODE), "__SEQNUM_ID"),
    "byte-invocation": json_line(DECODE, _SYSTEMD_INVOCATION_ID=list(b"abc")),
    "null-message": json_line(None),
    "byte-message": json_line(list(b"\x1b[1mbold")),
    "no-message": json.dumps({"__CURSOR": "c", "__REALTIME_TIMESTAMP": "1", "PRIORITY": "6"}),
    "suppressed": json_line("Suppressed 9", MESSAGE_ID=SUPPRESSED_MESSAGE_ID, N_DROPPED="9"),
    "crash": json_line("RuntimeError: CUDA error: an illegal memory access was encountered"),
    "not-an-object": "[1, 2]",
    "not-json": '{"__CURSOR": "x", "MESSAGE": "ok"',
}


@pytest.mark.parametrize("line", TEXT_LINE_CASES.values(), ids=TEXT_LINE_CASES.keys())
def test_the_text_line_path_decodes_as_the_general_one(line: str) -> None:
    """`decode_entry` reads a text line with types checked by msgspec, and anything else
    through the general path: both give the same entry for every kind of line."""
    assert decode_entry("h", line) == journal._decode_any("h", line)


def test_a_line_without_seqnums_takes_the_text_line_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every line of a host whose journalctl predates __SEQNUM (systemd < 254) is such a line:
    the general path costs it three times as much (4.7–4.9 against 1.4 µs a line)."""

    def general(host: str, line: str | bytes) -> JournalEntry | None:
        raise AssertionError("took the general path")

    monkeypatch.setattr(journal, "_decode_any", general)
    decoded = decode_entry("h", JOURNALCTL_252.encode())
    assert decoded is not None and decoded.seq is None and decoded.pid == "64"
    assert decoded.cursor.startswith("s=2c04") and decoded.message.endswith("seq=7")


@pytest.mark.parametrize("line", TEXT_LINE_CASES.values(), ids=TEXT_LINE_CASES.keys())
def test_a_line_decodes_the_same_from_the_bytes_journalctl_wrote(line: str) -> None:
    """The follower reads the stream as bytes; every kind of line gives the entry its text
    gives, notes and blank lines are skipped, and bytes that are not UTF-8 are replaced as
    the stream's decoding replaced them."""
    assert decode_entry("h", line.encode()) == decode_entry("h", line)
    assert decode_entry("h", b"-- Boot 1234 --") is None and decode_entry("h", b"") is None
    broken = json_line("bad \ufffd byte").encode().replace(b"\\ufffd", b"\xff")
    decoded = decode_entry("h", broken)
    assert decoded is not None and decoded.message == "bad \ufffd byte"


# --- records ----------------------------------------------------------------------------

TRACEBACK = [
    "[2025-07-25 07:53:08 TP2] Scheduler hit an exception: Traceback (most recent call last):",
    '  File ".../sglang/srt/managers/scheduler.py", line 2769, in run_scheduler_process',
    "RuntimeError: CUDA error: an illegal memory access was encountered",
    "For debugging consider passing CUDA_LAUNCH_BLOCKING=1",
]


def test_traceback_lines_join_their_record() -> None:
    entries = [entry(DECODE, 1)] + [entry(line, i + 2) for i, line in enumerate(TRACEBACK)]
    entries.append(entry("[2025-05-23 18:02:42] Received sigquit from a child process.", 9))
    records = assemble(entries)
    assert [r.message for r in records] == [DECODE, TRACEBACK[0], entries[-1].message]
    crash = records[1]
    assert crash.continuation == tuple(TRACEBACK[1:])
    assert crash.lines == tuple(TRACEBACK)
    assert crash.text == "\n".join(TRACEBACK)
    assert crash.cursor == entries[4].cursor and crash.seq == ("abc", 5)  # the resume point
    assert crash.timestamp == entries[1].timestamp
    assert crash.crash == "illegal_memory_access"  # most specific, from a continuation line
    assert records[2].crash == "sigquit"


def test_journal_prefixed_lines_start_records() -> None:
    records = assemble(
        [entry(JOURNAL_PREFIX + DECODE, 1), entry(JOURNAL_PREFIX + TRACEBACK[0], 2)]
        + [entry(line, 3 + i) for i, line in enumerate(TRACEBACK[1:])]
    )
    assert len(records) == 2
    assert records[1].continuation == tuple(TRACEBACK[1:])


def test_what_does_not_continue_a_record() -> None:
    records = assemble(
        [
            entry(TRACEBACK[0], 1),
            entry("Stopping sglang.service...", 2, pid="1", invocation=None),  # systemd
            entry("  from another process", 3, pid="999"),
            entry("  next run", 4, invocation=INV_B),
            entry("Traceback (most recent call last):", 5, invocation=INV_B),  # uncaught
            entry('  File "x.py", line 1', 6, invocation=INV_B),
        ]
    )
    assert [len(r.continuation) for r in records] == [0, 0, 0, 0, 1]
    assert [r.new_invocation for r in records] == [False, False, False, True, False]


def test_invocation_marker_only_on_change() -> None:
    records = assemble(
        [
            entry("[2026-01-01 00:00:00] a", 1),
            entry("[2026-01-01 00:00:00] b", 2),
            entry("[2026-01-01 00:00:01] c", 3, invocation=INV_B),
        ]
    )
    assert [r.new_invocation for r in records] == [False, False, True]
    assert display_lines(records[2]) == [invocation_marker(INV_B), "[2026-01-01 00:00:01] c"]


def test_pending_record_is_held_then_flushed_or_reset() -> None:
    assembler = RecordAssembler()
    assert assembler.feed([entry(TRACEBACK[0], 1), entry(TRACEBACK[1], 2)]) == []
    assert assembler.pending
    assert assembler.feed([entry(TRACEBACK[2], 3)]) == []
    (record,) = assembler.flush()
    assert record.lines == tuple(TRACEBACK[:3])
    assert not assembler.pending and assembler.flush() == []
    assembler.feed([entry(TRACEBACK[0], 4)])
    assembler.reset()  # a reconnect: the stream sends it again
    assert assembler.flush() == []


def test_continuation_is_capped() -> None:
    entries = [entry(TRACEBACK[0], 1)]
    entries += [entry(f"  frame {i}", i + 2) for i in range(MAX_CONTINUATION + 5)]
    records = assemble(entries)
    assert len(records) == 2
    assert len(records[0].continuation) == MAX_CONTINUATION
    assert len(records[1].continuation) == 4
    assert sum(len(r.lines) for r in records) == len(entries)


# --- filtering --------------------------------------------------------------------------


def test_filter_matches_any_line_of_a_record() -> None:
    only = LineFilter(PATTERNS)
    assert not only.shows_all
    assert only.accepts(entry(DECODE, 1))
    assert not only.accepts(entry("[2026-01-01 00:00:00] Load weight begin. avail mem=1 GB", 2))
    (crash,) = assemble([entry(TRACEBACK[0], 3), entry(TRACEBACK[2], 4)])
    assert only.accepts(crash)
    assert only.visible(crash) == [TRACEBACK[0], TRACEBACK[2]]


def test_crashes_and_restart_markers_pass_any_filter() -> None:
    narrow = LineFilter(["^never$"])
    sigquit = entry("[2025-05-23 18:02:42] Received sigquit from a child process.", 1)
    assert narrow.accepts(sigquit)
    (first, restarted) = assemble(
        [entry("[2026-01-01 00:00:00] a", 1), entry("[2026-01-01 00:00:01] b", 2, invocation=INV_B)]
    )
    assert narrow.visible(first) == []
    assert narrow.visible(restarted) == [invocation_marker(INV_B)]


def test_no_patterns_show_everything() -> None:
    every = LineFilter()
    assert every.shows_all
    assert every.accepts(entry("anything at all", 1))


def test_bad_pattern_is_named() -> None:
    with pytest.raises(ValueError, match=r"'accept \(len' is not a valid regular expression"):
        LineFilter(["accept (len"])


@pytest.mark.parametrize(
    "message",
    [
        list("ring\x07 back\x08space\rCR \x9b2J c1-csi \x1b]0;title\x07 \x7fdel".encode()),
        "ring\x07 back\x08space\rCR \x9b2J c1-csi \x1b]0;title\x07 \x7fdel",
    ],
    ids=["bytes", "string"],
)
def test_control_characters_never_reach_the_terminal(message: object) -> None:
    """BEL, BS, CR, C1 (U+009B is CSI to many terminals) and OSC titles are dropped."""
    decoded = decode_entry("h", json_line(message))
    assert decoded is not None
    assert decoded.message == "ring backspaceCR 2J c1-csi  del"
    assert "\tand\ttabs" in decode_entry("h", json_line("keeps\tand\ttabs")).message  # type: ignore[union-attr]
