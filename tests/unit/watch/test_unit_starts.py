"""systemd's start records as `journalctl -o json --output-fields=MESSAGE_ID,INVOCATION_ID`
prints them (systemd 252: `Started …` and `Scheduled restart job …`, catalog ids 39f53479…
and 5eb03494…), and the command that asks for them."""

from __future__ import annotations

import json

from console.transport import remote
from console.watch.unit_starts import parse_starts


def _entry(us: int, message_id: str, invocation: str | None = None) -> str:
    fields = {"__CURSOR": f"s=x;i={us:x}", "__REALTIME_TIMESTAMP": str(us)}
    fields["MESSAGE_ID"] = message_id
    if invocation is not None:
        fields["INVOCATION_ID"] = invocation
    return json.dumps(fields)


def test_starts_and_automatic_restarts_are_told_apart_and_junk_is_skipped() -> None:
    lines = [
        _entry(1_000_000, remote.UNIT_STARTED, "a" * 32),
        _entry(2_000_000, remote.UNIT_RESTART_SCHEDULED, "a" * 32),
        _entry(3_000_000, remote.UNIT_STARTED, "b" * 32),
        _entry(4_000_000, remote.UNIT_STARTED),  # no invocation: not a run we can name
        "not json",
        "[1, 2]",
        '{"MESSAGE_ID": "39f53479d3a045ac8e11786248231fbf"}',
    ]
    found = parse_starts(lines)
    assert found.starts == [(1.0, "a" * 32), (3.0, "b" * 32)]
    assert found.automatic == [2.0]


def test_the_command_asks_for_both_ids_within_the_window() -> None:
    argv = remote.unit_starts("sglang-k26.service", 600).argv
    assert argv[:3] == ("journalctl", "-u", "sglang-k26.service")
    assert "--since=600 seconds ago" in argv
    assert f"MESSAGE_ID={remote.UNIT_STARTED}" in argv
    assert f"MESSAGE_ID={remote.UNIT_RESTART_SCHEDULED}" in argv
