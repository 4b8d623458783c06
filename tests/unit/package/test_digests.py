"""The host's digest lines, as the real coreutils `sha256sum` and `openssl dgst -r` print them
for awkward names, read back as the right file's digest, and nothing read for a name not asked."""

from __future__ import annotations

import asyncio
import hashlib
import shutil
import subprocess
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path

import pytest

from console.package.digests import HostDigests, parse_digests
from console.transport import remote

NAMES = ["plain.json", "two  spaces.json", "back\\slash.json", "*star.json", "trail ", "ü.json"]


@pytest.fixture
def files(tmp_path: Path) -> dict[str, str]:
    digests = {}
    for i, name in enumerate(NAMES):
        path = tmp_path / name
        path.write_bytes(b"content %d\n" % i)
        digests[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
    return digests


def lines_of(command: remote.Command) -> list[str]:
    result = subprocess.run(list(command.argv), capture_output=True, text=True, check=False)
    return result.stdout.splitlines()


@pytest.mark.parametrize("hasher", [remote.sha256sum, remote.openssl_sha256])
def test_real_hashers_output_gives_every_files_own_digest(
    files: dict[str, str], hasher: Callable[[Sequence[str]], remote.Command]
) -> None:
    program = hasher([next(iter(files))]).argv[0]
    if shutil.which(program) is None:
        pytest.skip(f"needs {program}")
    assert parse_digests(lines_of(hasher(list(files))), list(files)) == files


def test_a_line_for_a_path_not_asked_is_ignored(files: dict[str, str], tmp_path: Path) -> None:
    asked = [str(tmp_path / "plain.json")]
    lines = lines_of(remote.openssl_sha256(list(files))) + lines_of(remote.sha256sum(list(files)))
    assert parse_digests(lines, asked) == {asked[0]: files[asked[0]]}


def test_an_unreadable_file_gets_no_digest_from_either(tmp_path: Path) -> None:
    gone = str(tmp_path / "gone.json")
    for hasher in (remote.sha256sum, remote.openssl_sha256):
        assert parse_digests(lines_of(hasher([gone])), [gone]) == {}
    assert parse_digests(["0" * 63 + "  " + gone, "g" * 64 + " *" + gone], [gone]) == {}


class _SlowToExit:
    """A session whose hashing command prints every digest, then takes a while to exit (its
    exit status arrives late, as on a busy host)."""

    name = "h1"

    def __init__(self) -> None:
        self.ended: list[str] = []

    async def stream(self, command: remote.Command) -> AsyncIterator[list[str]]:
        paths = [a for a in command.argv if a.startswith("/")]
        try:
            yield [f"{hashlib.sha256(p.encode()).hexdigest()} *{p}" for p in paths]
            await asyncio.sleep(0.2)
        except asyncio.CancelledError:
            self.ended.append("cancelled")
            raise
        self.ended.append("exited")


async def test_a_finished_snapshot_lets_the_hashing_command_end_instead_of_cancelling_it() -> None:
    """Cancelled, `openssl` went into the audit log as a command that never ended."""
    session = _SlowToExit()
    paths = ["/srv/a.json", "/srv/b.json"]
    async with HostDigests(session, [(p, 10) for p in paths]) as digests:  # type: ignore[arg-type]
        for p in paths:
            assert await digests.get(p) == hashlib.sha256(p.encode()).hexdigest()
    assert session.ended == ["exited"]
