"""The simulated journald's fast `-o json` rendering writes exactly the bytes of its
field-by-field reference, whatever a message holds (the follower parses these bytes, and a
benchmark that changed them would measure something else)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from console.sim.journal import SimJournal
from console.sim.load import decode_line
from console.transport.remote import FOLLOW_FIELDS

UNIT = "sglang-k26-ddtree.service"

ODD_MESSAGES = [
    decode_line(7, 1_700_000_000.25),  # a flood line
    "",
    'say "hi" \\ back\\slash \\u0041 not an escape',
    "tab\there, newline\nthere, carriage\rreturn",
    "\x1b[31mred\x1b[0m [2026-01-01 00:00:00 TP0] Decode batch, accept len: 4.1",
    "NUL \x00 BEL \x07 DEL \x7f end",
    "C1 \x85 \x9b, line separator \u2028, é, 你好, 🚀",
    b"non-UTF-8 \xff\xfe bytes".decode("utf-8", "surrogateescape"),
    b"non-UTF-8 \xff with an escape \x1b[0m".decode("utf-8", "surrogateescape"),
    "100% of %s and %d and %%",
    "x" * 100_000,
    "null",
]


OUTPUT_FIELDS = {
    "all": None,
    "follower": set(FOLLOW_FIELDS),  # what `specops` asks for
    "message": {"MESSAGE"},
    "none": {"NOT_A_FIELD"},
}


def rendered(
    journal: SimJournal, message: str, output_fields: set[str] | None = None, **fields: str
) -> tuple[str, str]:
    entry = journal.append(UNIT, message, **fields)
    assert entry is not None
    return (
        journal.render(entry, "json", output_fields),
        journal.render_json_reference(entry, output_fields),
    )


@pytest.mark.parametrize("output_fields", OUTPUT_FIELDS.values(), ids=OUTPUT_FIELDS.keys())
@pytest.mark.parametrize("message", ODD_MESSAGES)
def test_a_message_renders_as_the_reference_does(
    message: str, output_fields: set[str] | None
) -> None:
    journal = SimJournal()
    for _ in range(3):  # and again, once the header template is made
        fast, reference = rendered(journal, message, output_fields, _PID="4242")
        assert fast == reference
    json.loads(fast)


def test_byte_arrays_and_odd_fields_render_as_the_reference_does() -> None:
    journal = SimJournal()
    fast, reference = rendered(
        journal,
        "colour \x1b[1m",
        None,
        _PID="4242",
        CODE_FILE='a "quoted" \\path',
        NOTE="bell\x07",
        _BOOT_ID="a field named like a header",
    )
    assert fast == reference
    line = json.loads(fast)
    assert line["MESSAGE"] == list(b"colour \x1b[1m")
    assert line["NOTE"] == list(b"bell\x07")


def test_odd_journal_ids_render_as_the_reference_does() -> None:
    journal = SimJournal()
    rendered(journal, "first")
    journal.seqnum_id, journal.boot_id = 'id with "%" and \\', "b%sb%%"
    fast, reference = rendered(journal, "after the ids changed")
    assert fast == reference
    assert json.loads(fast)["__CURSOR"] == journal.cursor(next(journal.newest_after(0)))


@settings(max_examples=300, deadline=None)
@given(message=st.text(), extra=st.text(), follower=st.booleans())
def test_any_text_renders_as_the_reference_does(message: str, extra: str, follower: bool) -> None:
    fields = set(FOLLOW_FIELDS) if follower else None
    fast, reference = rendered(SimJournal(), message, fields, _PID="1", EXTRA=extra)
    assert fast == reference
