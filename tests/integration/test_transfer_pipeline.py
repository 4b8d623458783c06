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

from console.hosts.profiles import Profile
from console.package.digests import HASH_BYTES, HostDigests, hash_batches
from console.package.transfer import FileJob, Outcome, Placement, TransferError, fetch, run_bounded
from console.sim.fleet import SimFleet
from console.transport.ssh import CommandRecord, HostSession

MiB = 1 << 20


async def fetch_all(
    session: HostSession, files: list[tuple[str, int]], dest: Path, progress: list[int]
) -> list[Placement]:
    """What console/package/snapshot.py does with a host's bench files."""
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
    hashed = [r for r in commands if r.command.startswith(("openssl", "sha256sum"))]
    assert len(hashed) == len(hash_batches(files)) == 2  # the host hashed each file once
    assert all(r.command.startswith("openssl dgst") and r.returncode == 0 for r in hashed)

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


async def test_a_host_without_openssl_hashes_with_sha256sum_and_asks_openssl_once(
    sim: SimFleet, session: HostSession, commands: list[CommandRecord], tmp_path: Path
) -> None:
    host = sim.hosts["b300"]
    host.lacks.add("openssl")
    remote_dir = host.root / "root" / "artifacts"
    remote_dir.mkdir(parents=True)
    contents = {f"run_{i:03d}.json": b'{"run": %d}\n' % i for i in range(3)}
    contents["ckpt.bin"] = os.urandom(HASH_BYTES + 1)  # a command of its own
    for name, data in contents.items():
        (remote_dir / name).write_bytes(data)
    files = [(f"/root/artifacts/{n}", len(d)) for n, d in sorted(contents.items())]

    placed = await fetch_all(session, files, tmp_path / "bench", [])

    assert {p.path.name: p.path.read_bytes() for p in placed} == contents
    hashed = [r for r in commands if r.command.startswith(("openssl", "sha256sum"))]
    assert [(r.command.split()[0], r.returncode) for r in hashed] == [
        ("openssl", 127),
        ("sha256sum", 0),
        ("sha256sum", 0),
    ]


async def test_a_file_openssl_cannot_read_is_asked_of_sha256sum_alone_and_fails_by_its_name(
    sim: SimFleet, session: HostSession, commands: list[CommandRecord], tmp_path: Path
) -> None:
    remote_dir = sim.hosts["b300"].root / "root" / "artifacts"
    remote_dir.mkdir(parents=True)
    (remote_dir / "kept.json").write_bytes(b"{}\n")
    files = [("/root/artifacts/kept.json", 3), ("/root/artifacts/gone.json", 3)]

    async with HostDigests(session, files) as digests:
        assert await digests.get("/root/artifacts/kept.json") == hashlib.sha256(b"{}\n").hexdigest()
        assert await digests.get("/root/artifacts/gone.json") is None
        async with session.sftp() as sftp:

            async def fetch_gone(directory: Path) -> Placement:
                return await fetch(
                    session,
                    sftp,
                    "/root/artifacts/gone.json",
                    directory,
                    "gone.json",
                    digest=digests,
                    size=3,
                    mtime=None,
                    progress=lambda n: None,
                    package=tmp_path,
                )

            with pytest.raises(TransferError, match=r"gone\.json: No such file or directory"):
                await fetch_gone(tmp_path / "fresh")  # a free name is fetched at once
            (tmp_path / "taken").mkdir()
            (tmp_path / "taken" / "gone.json").write_bytes(b"old")
            with pytest.raises(TransferError, match=r"gone\.json: the host could not read it"):
                await fetch_gone(tmp_path / "taken")  # a taken one waits for the digest

    hashed = [r.command for r in commands if r.command.startswith(("openssl", "sha256sum"))]
    assert hashed == [
        "openssl dgst -sha256 -r /root/artifacts/kept.json /root/artifacts/gone.json",
        "sha256sum -- /root/artifacts/gone.json",
    ]
    assert not os.listdir(tmp_path / "fresh")  # nothing half-written
    assert os.listdir(tmp_path / "taken") == ["gone.json"]
