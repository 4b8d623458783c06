"""A history file on the host is the host's to write: a damaged or hostile one is an error
naming the file and what is wrong, never a traceback, never read as "no history" (a rollback
would then propose the unit's original), and its text never carries ESC to the terminal."""

from __future__ import annotations

import json

import pytest

from console.tuning.history import HistoryError, parse_history

PATH = "/var/lib/specops/sglang.service/history.json"
ENTRY = {
    "n": 1, "kind": "change", "outcome": "kept", "values": {"budget": 8}, "argv": [],
    "environment": {}, "dropin": "[Service]\n",
}  # fmt: skip


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ('{"version": 1, "entries": "x"}', "no list of entries"),
        ("[" * 100_000 + "]" * 100_000, "nested too deep"),
        ('{"version": 99, "entries": []}', "version 99; this specops reads version 1"),
        ('{"version": 1, "entries": [1]}', "entry 0 is not an object"),
        (json.dumps({"version": 1, "entries": [{**ENTRY, "n": "1"}]}), "entry 0: "),
        (json.dumps({"version": 1, "entries": [{**ENTRY, "values": "x"}]}), "values is 'x'"),
        ("{", "is not a specops history"),
    ],
)
def test_a_damaged_history_is_an_error_naming_the_file(text: str, said: str) -> None:
    with pytest.raises(HistoryError) as raised:
        parse_history(text, PATH)
    assert PATH in str(raised.value) and said in str(raised.value)


def test_control_characters_in_an_entrys_text_never_reach_the_terminal() -> None:
    who = "alice\x1b]52;c;cHduZWQ=\x07@laptop\x1b[2J"
    text = json.dumps({"version": 1, "entries": [{**ENTRY, "who": who, "excerpt": ["a\x1bb"]}]})
    (entry,) = parse_history(text, PATH)
    assert "\x1b" not in entry.who and "\x07" not in entry.who
    assert entry.who.startswith("alice") and entry.who.endswith("@laptop\ufffd[2J")
    assert entry.excerpt == ("a\ufffdb",)


def test_an_empty_file_is_no_history_yet() -> None:
    assert parse_history("", PATH) == []
    assert parse_history(json.dumps({"version": 1, "entries": [ENTRY]}), PATH)[0].n == 1
