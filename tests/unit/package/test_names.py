"""Host file names: kept, renamed (`.part`) or refused by name; shown without terminal tricks."""

from __future__ import annotations

import pytest

from console.package.names import RefusedName, package_name, shown


@pytest.mark.parametrize(
    ("name", "kept"),
    [
        ("bench.json", "bench.json"),
        ("c.json.part", "c.json_part"),  # `.part` is specops' own temporary suffix
        ("back\\slash.json", "back\\slash.json"),  # the manifest escapes it like sha256sum
        ("ünïcode.json", "ünïcode.json"),
        ("x" * 250, "x" * 250),  # 255 bytes with `.part`
    ],
)
def test_names_kept(name: str, kept: str) -> None:
    assert package_name(name) == kept


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("a\nb.json", "line break"),
        ("a\rb.json", "line break"),
        (b"\xff\xfe.json".decode("utf-8", "surrogateescape"), "not UTF-8"),
        ("a\x07b.json", "control character"),
        ("x" * 251, "too long: 256 bytes"),
        ("é" * 126, "too long: 257 bytes"),  # bytes, not characters
    ],
)
def test_names_refused_with_the_reason(name: str, why: str) -> None:
    with pytest.raises(RefusedName, match=why):
        package_name(name)


def test_shown_escapes_what_could_draw_on_the_terminal() -> None:
    raw = "a\\b\nc\x1b[2J\x9b" + b"\xff".decode("utf-8", "surrogateescape")
    assert shown(raw) == "a\\\\b\\nc\\x1b[2J\\x9b\\xff"
    assert shown("plain ü.json") == "plain ü.json"
