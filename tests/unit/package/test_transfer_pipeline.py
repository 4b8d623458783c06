"""The fast path's own rules: blocks land in file order, the host's hashing is split so each
digest comes soon, and concurrent fetches never share a `.part` or outlive a failure."""

from __future__ import annotations

import asyncio
import hashlib
import os
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import asyncssh
import pytest

from console.package.digests import HASH_BATCH, HASH_BYTES, hash_batches
from console.package.transfer import LARGE_FILE, FileJob, _download, run_bounded

MiB = 1 << 20


class ScrambledFile:
    """A remote file whose concurrent reads complete out of file order: block `i` answers
    after `late(i)` turns of the event loop; blocks in `missing` come back empty (as past the
    end), and a read of block `fails` raises asyncssh's ConnectionLost (the link dropped)."""

    def __init__(
        self,
        data: bytes,
        block: int,
        late: Callable[[int], int],
        missing: tuple[int, ...] = (),
        fails: int | None = None,
    ) -> None:
        self.data, self.block, self.late = data, block, late
        self.missing, self.fails = missing, fails
        self.started = self.ended = 0

    async def __aenter__(self) -> ScrambledFile:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None

    async def stat(self) -> Any:
        return SimpleNamespace(size=len(self.data))

    async def read(self, length: int, at: int) -> bytes:
        self.started += 1
        try:
            i = at // self.block
            for _ in range(self.late(i)):
                await asyncio.sleep(0)
            if i == self.fails:
                raise asyncssh.ConnectionLost("Connection lost")
            return b"" if i in self.missing else self.data[at : at + length]
        finally:
            self.ended += 1


def scrambled_sftp(file: ScrambledFile) -> Any:
    return SimpleNamespace(
        limits=SimpleNamespace(max_read_len=file.block),
        open=lambda path, mode, block_size: file,
    )


async def test_blocks_arriving_out_of_order_are_written_in_file_order(tmp_path: Path) -> None:
    block = 64 << 10
    data = os.urandom(11 * MiB + 12345)  # several write batches and a ragged tail
    # Within each run of 40 blocks the reads answer backwards: the first comes last.
    file = ScrambledFile(data, block, late=lambda i: 39 - i % 40)
    part = tmp_path / "x.json.part"
    progress: list[int] = []

    digest = await _download(scrambled_sftp(file), "/x.json", part, progress.append)

    assert part.read_bytes() == data
    assert digest == hashlib.sha256(data).hexdigest()
    assert sum(progress) == len(data)


async def test_a_block_that_never_arrives_is_an_error_not_a_short_file(tmp_path: Path) -> None:
    block = 64 << 10
    file = ScrambledFile(os.urandom(20 * block), block, late=lambda i: i, missing=(7,))
    with pytest.raises(asyncssh.SFTPFailure, match=f"offset {7 * block}"):
        await _download(scrambled_sftp(file), "/x", tmp_path / "x.part", print)


async def test_a_link_dropped_under_one_read_ends_every_other_read_first(tmp_path: Path) -> None:
    """asyncssh's read_parallel left the other reads running when one failed: each then
    failed unheard ("Task exception was never retrieved" on stderr)."""
    block = 64 << 10
    file = ScrambledFile(os.urandom(300 * block), block, late=lambda i: 5, fails=3)
    with pytest.raises(asyncssh.ConnectionLost):
        await _download(scrambled_sftp(file), "/x", tmp_path / "x.part", print)
    assert file.started > 100 and file.ended == file.started


def test_hash_batches_keep_order_and_give_a_big_file_its_own_command() -> None:
    small = [(f"/r/{i}.json", 30_000) for i in range(HASH_BATCH + 5)]
    big = [("/r/ckpt0.bin", HASH_BYTES + 1), ("/r/ckpt1.bin", HASH_BYTES // 2)]
    batches = hash_batches([*small[:3], big[0], *small[3:], big[1], small[0]])

    flat = [p for batch in batches for p in batch]
    assert flat == [p for p, _ in [*small[:3], big[0], *small[3:], big[1]]]  # once, in order
    assert ["/r/ckpt0.bin"] in batches
    assert all(len(b) <= HASH_BATCH for b in batches)
    sizes = dict([*small, *big])
    assert all(sum(sizes[p] for p in b) <= HASH_BYTES for b in batches if len(b) > 1)
    assert hash_batches([]) == []


async def test_run_bounded_limits_small_files_runs_large_ones_alone_and_one_name_at_a_time() -> (
    None
):
    running: list[str] = []
    seen: list[tuple[str, ...]] = []  # what ran at once, each time a job started
    started: list[str] = []

    def job(tag: str) -> Any:
        async def run() -> None:
            started.append(tag)
            running.append(tag)
            seen.append(tuple(running))
            await asyncio.sleep(0.01)
            running.remove(tag)

        return run

    jobs = [FileJob(f"s{i}.json", 100, job(f"s{i}")) for i in range(6)]
    jobs += [FileJob("big.bin", LARGE_FILE, job("big"))]
    jobs += [FileJob("same.json", 100, job(f"same{i}")) for i in range(3)]
    await run_bounded(jobs, limit=3)

    assert max(len(s) for s in seen) == 3
    assert all(s == ("big",) for s in seen if "big" in s)
    assert not any(sum(t.startswith("same") for t in s) > 1 for s in seen)
    assert [t for t in started if t.startswith("same")] == ["same0", "same1", "same2"]
    assert started[:6] == [f"s{i}" for i in range(6)]  # started in the order given


async def test_the_first_failure_stops_the_others_after_they_have_cleaned_up() -> None:
    cleaned: list[str] = []
    started: list[str] = []

    def slow(tag: str) -> Any:
        async def run() -> None:
            started.append(tag)
            try:
                await asyncio.sleep(10)
            finally:
                cleaned.append(tag)

        return run

    async def fail() -> None:
        await asyncio.sleep(0.01)
        raise OSError("disk full")

    jobs = [FileJob("a", 1, slow("a")), FileJob("b", 1, fail), FileJob("c", 1, slow("c"))]
    jobs += [FileJob("d", 1, slow("d"))]
    with pytest.raises(OSError, match="disk full"):
        await run_bounded(jobs, limit=3)
    assert started == ["a", "c"]  # d never started
    assert sorted(cleaned) == ["a", "c"]
