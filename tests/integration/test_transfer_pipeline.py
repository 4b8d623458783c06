"""Fetching a host's files several at a time while the host hashes them, through the real
client against the simulated host: every byte arrives, every name is kept, nothing is left
half-written, and a second run transfers nothing."""

from __future__ import annotations

import functools
import hashlib
import os
import posixpath
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from console.digests import HostDigests, hash_batches
from console.profiles import Profile
from console.sim.fleet import SimFleet
from console.ssh import CommandRecord, HostSession
from console.transfer import FileJob, Outcome, Placement, fetch, run_bounded

MiB = 1 << 20


async def fetch_all(
    session: HostSession, files: list[tuple[str, int]], dest: Path, progress: list[int]
) -> list[Placement]:
    """What console/snapshot.py does with a host's bench files."""
    placed: list[Placement] = []
    async with session.sftp() as sftp, HostDigests(session, files) as digests:

        async def one(path: str, size: int) -> None:
            placed.append(
                await fetch(
                    session,
                    sftp,
                    path,
                    dest,
                    posixpath.basename(path),
                    digest=digests,
                    size=size,
                    mtime=None,
                    progress=progress.append,
                    package=dest.parent,
                )
            )

        await run_bounded(
            FileJob(posixpath.basename(p), n, functools.partial(one, p, n)) for p, n in files
        )
    return placed


@pytest.fixture
def commands() -> list[CommandRecord]:
    """Every remote command the session ran (its audit records)."""
    return []


@pytest.fixture
async def session(
    profiles: list[Profile], commands: list[CommandRecord]
) -> AsyncIterator[HostSession]:
    session = HostSession(profiles[0], on_command=commands.append)
    session.start()
    assert await session.wait_connected(10)
    yield session
    await session.close()


async def test_a_mixed_set_arrives_byte_identical_and_a_rerun_transfers_nothing(
    sim: SimFleet, session: HostSession, commands: list[CommandRecord], tmp_path: Path
) -> None:
    remote_dir = sim.hosts["b300"].root / "root" / "artifacts"
    remote_dir.mkdir(parents=True)
    contents = {f"run_{i:03d}.json": b'{"run": %d, "accept_len": 4.2}\n' % i for i in range(130)}
    contents["empty.json"] = b""
    contents["ckpt_a.bin"] = os.urandom(5 * MiB + 17)
    contents["ckpt_b.bin"] = os.urandom(6 * MiB)
    for name, data in contents.items():
        (remote_dir / name).write_bytes(data)
    files = [(f"/root/artifacts/{n}", len(d)) for n, d in sorted(contents.items())]
    dest = tmp_path / "pkg" / "bench"
    progress: list[int] = []

    placed = await fetch_all(session, files, dest, progress)

    assert {p.path.name for p in placed} == set(contents)
    for p in placed:
        assert p.outcome is Outcome.NEW
        assert p.path.read_bytes() == contents[p.path.name]
        assert p.sha256 == hashlib.sha256(contents[p.path.name]).hexdigest()
    assert sum(progress) == sum(len(d) for d in contents.values())
    assert sorted(os.listdir(dest)) == sorted(contents)  # no .part left anywhere
    hashed = [r for r in commands if r.command.startswith("sha256sum")]
    assert len(hashed) == len(hash_batches(files)) == 2  # the host hashed each file once
    assert all(r.returncode == 0 for r in hashed)

    progress.clear()
    again = await fetch_all(session, files, dest, progress)
    assert {p.outcome for p in again} == {Outcome.UNCHANGED}
    assert sum(progress) == 0


async def test_one_name_from_two_directories_keeps_both_and_a_copy_of_either_is_unchanged(
    sim: SimFleet, session: HostSession, tmp_path: Path
) -> None:
    root = sim.hosts["b300"].root / "root"
    for directory, data in (("a", b"first\n"), ("b", b"second\n"), ("c", b"first\n")):
        (root / directory).mkdir()
        (root / directory / "result.json").write_bytes(data)
    files = [(f"/root/{d}/result.json", 6 + (d == "b")) for d in "abc"]
    dest = tmp_path / "pkg" / "bench"

    placed = await fetch_all(session, files, dest, [])

    second = hashlib.sha256(b"second\n").hexdigest()
    assert [(p.path.name, p.outcome) for p in placed] == [
        ("result.json", Outcome.NEW),
        (f"result.{second[:8]}.json", Outcome.KEPT_BOTH),
        ("result.json", Outcome.UNCHANGED),
    ]
    assert (dest / "result.json").read_bytes() == b"first\n"
    assert (dest / f"result.{second[:8]}.json").read_bytes() == b"second\n"
    assert len(os.listdir(dest)) == 2
