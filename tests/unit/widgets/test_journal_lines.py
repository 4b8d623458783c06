"""Journal lines as drawn: a batch line's numbers come before its request counts."""

from __future__ import annotations

from widgets.journal_view import display_line

DECODE = (
    "[2026-12-01 21:40:10 TP0] Decode batch, #running-req: 32, #token: 41230, token usage: 0.02,"
    " accept len: 4.31, accept rate: 0.41, cuda graph: True, gen throughput (token/s): 1650.00,"
    " #queue-req: 0"
)


def test_a_decode_line_starts_with_accept_len_and_throughput_and_keeps_every_field() -> None:
    shown = display_line(DECODE)
    assert shown.startswith(
        "[2026-12-01 21:40:10 TP0] Decode batch, accept len: 4.31, gen throughput (token/s): 1650"
    )
    assert sorted(shown.split(", ")[1:]) == sorted(DECODE.split(", ")[1:])


def test_other_lines_are_unchanged() -> None:
    line = "[2026-12-01 21:40:02] The server is fired up and ready to roll!"
    assert display_line(line) == line
    assert display_line("Decode batch, #running-req: 3") == "Decode batch, #running-req: 3"
