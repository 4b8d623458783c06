"""Package placement: new content gets a name, changed content never replaces the old."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from console.package import transfer
from console.package.transfer import Outcome, hashed_name, human_size, resolve_target, write_bytes


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("ddtree_b8.json", "ddtree_b8.0123abcd.json"),
        (
            "sglang-k26-ddtree-B300-nvlsb8t4.service",
            "sglang-k26-ddtree-B300-nvlsb8t4.0123abcd.service",
        ),
        ("README", "README.0123abcd"),
        (".hidden", ".hidden.0123abcd"),
        ("archive.tar.gz", "archive.tar.0123abcd.gz"),
    ],
)
def test_hashed_names_keep_the_extension(name: str, expected: str) -> None:
    assert hashed_name(name, "0123abcd" + "0" * 56) == expected


def test_new_then_unchanged_then_kept_both(tmp_path: Path) -> None:
    first = write_bytes(tmp_path / "d", "x.json", b"one\n")
    assert (first.outcome, first.path.name) == (Outcome.NEW, "x.json")
    mtime = first.path.stat().st_mtime_ns

    same = write_bytes(tmp_path / "d", "x.json", b"one\n")
    assert same.outcome is Outcome.UNCHANGED and same.path == first.path
    assert first.path.stat().st_mtime_ns == mtime

    other = write_bytes(tmp_path / "d", "x.json", b"two\n")
    assert other.outcome is Outcome.KEPT_BOTH
    two = sha(b"two\n")
    assert other.path.name == f"x.{two[:8]}.json"
    assert first.path.read_bytes() == b"one\n" and other.path.read_bytes() == b"two\n"
    assert first.path.stat().st_mtime_ns == mtime

    # Either version coming back is already there.
    assert write_bytes(tmp_path / "d", "x.json", b"two\n").outcome is Outcome.UNCHANGED
    assert write_bytes(tmp_path / "d", "x.json", b"one\n").outcome is Outcome.UNCHANGED
    assert sorted(p.name for p in (tmp_path / "d").iterdir()) == sorted(["x.json", other.path.name])


def test_a_prefix_clash_takes_a_longer_name_and_overwrites_nothing(tmp_path: Path) -> None:
    digest = sha(b"new\n")
    (tmp_path / "x.json").write_bytes(b"old\n")
    squatter = tmp_path / f"x.{digest[:8]}.json"
    squatter.write_bytes(b"unrelated\n")
    target, outcome = resolve_target(tmp_path, "x.json", digest)
    assert outcome is Outcome.KEPT_BOTH and target.name == f"x.{digest[:16]}.json"
    placed = write_bytes(tmp_path, "x.json", b"new\n")
    assert placed.path == target and target.read_bytes() == b"new\n"
    assert squatter.read_bytes() == b"unrelated\n"


def test_a_failed_write_leaves_no_part_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(*args: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("console.package.transfer.publish_new", refuse)
    with pytest.raises(OSError, match="No space left"):
        write_bytes(tmp_path / "d", "x.json", b"data\n")
    assert list((tmp_path / "d").iterdir()) == []


def test_human_sizes() -> None:
    assert [human_size(n) for n in (0, 1023, 1024, 3 << 20, 5 << 30)] == [
        "0 B",
        "1023 B",
        "1.0 KiB",
        "3.0 MiB",
        "5.0 GiB",
    ]


@pytest.mark.parametrize(
    ("source", "mask", "kept"),
    [(0o644, 0o077, 0o600), (0o600, 0o022, 0o600), (0o644, 0o022, 0o644)],
)
def test_a_fetched_file_keeps_its_mode_less_the_umask(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: int, mask: int, kept: int
) -> None:
    """As scp: the host's bits, never widened, and an operator's umask 077 keeps a shared
    package's bench files to themselves (they came 0644 under it)."""
    part = tmp_path / "a.json.part"
    part.write_text("{}")
    monkeypatch.setattr(transfer, "umask", lambda: mask)  # the process's, read at start
    transfer._finish(part, tmp_path / "a.json", None, source)
    assert (tmp_path / "a.json").stat().st_mode & 0o777 == kept
