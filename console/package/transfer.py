"""Putting files into a reproduction package without ever losing or half-writing one.

Two rules hold for every file specops puts in a package, fetched or generated:

- **Nothing half-written.** Bytes go to `NAME.part` first (which no manifest lists), are
  checked (a download against the host's own `sha256sum`), flushed to disk, and only then get
  their real name. Any failure, including cancellation, removes the `.part`.
- **Nothing lost.** A package path, once written, is never given other content. When new
  content arrives for a name that already holds something else, both are kept: the new one
  is named `STEM.<first 8 hex of its sha256>.EXT` (16 or 64 hex digits on a prefix clash).
  Content already present under either name is left alone, mtime and all.

The final step links the `.part` to its name (`link(2)` refuses to replace an existing file,
so a concurrent writer cannot be overwritten either), falling back to `os.replace` on file
systems without hard links.

Speed (bench/transfer.py measures it against scp): each file is read with many SFTP requests
in flight, and written and hashed by a thread as its blocks arrive; small files are fetched
several at a time (`run_bounded`); and with `HostDigests` (console/package/digests.py) the
host runs `sha256sum` while the files download, so a file whose name is still free is fetched before
its digest is known and checked as soon as it is.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import BinaryIO

import asyncssh

from console.local.files import publish_new, umask, write_file
from console.package.digests import HostDigests, remote_hashes
from console.package.manifest import PART_SUFFIX, hash_file
from console.package.names import shown as shown_name
from console.transport.ssh import Disconnected, HostSession, RemoteError

IN_FLIGHT = 16 << 20
"""Bytes of SFTP read requests kept outstanding per file. asyncssh's default is 16 requests
(4 MiB at OpenSSH's 255 KiB per read); on loopback 64 were needed to keep pace with scp
(bench/transfer.py), and more did not help."""
MAX_REQUESTS = 128
"""The most read requests outstanding per file, whatever the server's read length."""
WRITE_BATCH = 4 << 20
"""Bytes of received data handed to the disk thread (written and hashed) at a time."""
FILES_AT_ONCE = 8
"""Small files fetched at the same time from one host (`run_bounded`). A small file costs
round trips (open, stat, read, close) and two fsyncs rather than bandwidth, so several in
flight hide each other's latency (8 took 200 JSON files from 0.88 s to 0.47 s on loopback)."""
LARGE_FILE = 4 << 20
"""From this size a file is fetched on its own: its 16+ parallel reads fill the link."""

Progress = Callable[[int], None]
"""Called with the number of bytes just written."""


class Outcome(StrEnum):
    NEW = "new"
    UNCHANGED = "unchanged"
    KEPT_BOTH = "kept both"
    """New content for a name that already held other content: saved under a hashed name."""


@dataclass(frozen=True)
class Placement:
    """Where some content ended up in the package."""

    path: Path
    sha256: str
    size: int
    outcome: Outcome


class TransferError(RemoteError):
    """One file could not be fetched; the message names it. Other files may still succeed."""


def hashed_name(name: str, digest: str, digits: int = 8) -> str:
    """`bench.json` → `bench.<digest[:digits]>.json`; a name without a suffix gets it appended."""
    stem, dot, ext = name.rpartition(".")
    if not dot or not stem:  # `README` or `.hidden`
        return f"{name}.{digest[:digits]}"
    return f"{stem}.{digest[:digits]}.{ext}"


def resolve_target(directory: Path, name: str, digest: str) -> tuple[Path, Outcome]:
    """Where content with `digest` goes under `name`, and whether it is already there."""
    plain = directory / name
    if not plain.exists():
        return plain, Outcome.NEW
    if plain.is_file() and hash_file(plain) == digest:
        return plain, Outcome.UNCHANGED
    for digits in (8, 16, 64):
        candidate = directory / hashed_name(name, digest, digits)
        if not candidate.exists():
            return candidate, Outcome.KEPT_BOTH
        if candidate.is_file() and hash_file(candidate) == digest:
            return candidate, Outcome.UNCHANGED
    raise FileExistsError(f"{directory / hashed_name(name, digest, 64)} holds other content")


def write_bytes(directory: Path, name: str, content: bytes) -> Placement:
    """Put generated content (an excerpt, a unit file, metadata) into the package."""
    digest = hashlib.sha256(content).hexdigest()
    target, outcome = resolve_target(directory, name, digest)
    if outcome is not Outcome.UNCHANGED:
        directory.mkdir(parents=True, exist_ok=True)
        write_file(target, content, publish_new, suffix=PART_SUFFIX, mode=0o644)
    return Placement(target, digest, len(content), outcome)


# --- remote files ------------------------------------------------------------------------


@dataclass(frozen=True)
class FileJob:
    """One file to put in the package, for `run_bounded`."""

    name: str
    """The package path it writes: two jobs for one name never run at once (one `.part`)."""
    size: int
    run: Callable[[], Awaitable[None]]


async def run_bounded(jobs: Iterable[FileJob], limit: int = FILES_AT_ONCE) -> None:
    """Start `jobs` in order: up to `limit` small files at once, a large one on its own.

    A file of LARGE_FILE bytes or more keeps the link busy by itself; running others beside
    it would only multiply what is buffered, and when the link dies it is the one named.
    The first failure cancels the jobs still running and waits for them (so none is left
    holding a `.part`), then is raised as itself.
    """
    free = limit
    room = asyncio.Event()
    names: dict[str, asyncio.Lock] = {}

    async def run(job: FileJob, weight: int) -> None:
        nonlocal free
        try:
            async with names.setdefault(job.name, asyncio.Lock()):
                await job.run()
        finally:
            free += weight
            room.set()

    try:
        async with asyncio.TaskGroup() as group:
            for job in jobs:
                weight = limit if job.size >= LARGE_FILE else 1
                while free < weight:
                    room.clear()
                    await room.wait()
                free -= weight
                group.create_task(run(job, weight))
    except BaseExceptionGroup as failed:
        raise failed.exceptions[0] from None


def _lost(exc: BaseException) -> bool:
    """The link (not the file) failed: stop this host instead of trying every other file.

    A real sshd dying mid-transfer surfaces as a reset socket or a lost SFTP session, and
    every later request as "Connection not open"; asyncssh's own disconnect errors cover the
    simulated host's aborts.
    """
    return isinstance(
        exc,
        asyncssh.DisconnectError
        | asyncssh.ChannelOpenError
        | asyncssh.SFTPConnectionLost
        | asyncssh.SFTPNoConnection
        | ConnectionError,
    )


def human_size(n: int) -> str:
    """`512 B`, `3.1 KiB`, `64.0 MiB`: for messages and summaries."""
    if n < 1024:
        return f"{n} B"
    value = float(n)
    for unit in ("KiB", "MiB", "GiB"):
        value /= 1024
        if value < 1024 or unit == "GiB":
            break
    return f"{value:.1f} {unit}"


def _append(out: BinaryIO, digest: hashlib._Hash, blocks: list[bytes]) -> int:
    """Write and hash consecutive blocks, each while it is still in the CPU's cache.

    Joining them first measured slower: a fresh multi-MiB buffer, read twice from memory.
    """
    for block in blocks:
        out.write(block)
        digest.update(block)
    return sum(len(b) for b in blocks)


def _create_private(part: Path) -> BinaryIO:
    """The `.part`, readable by its owner only until `_finish` gives it the source's mode."""
    part.unlink(missing_ok=True)  # a stale one may carry wider bits; O_CREAT would keep them
    return os.fdopen(os.open(part, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb")


def _close(out: BinaryIO, durable: bool) -> None:
    try:
        if durable:
            out.flush()
            os.fsync(out.fileno())
    finally:
        out.close()


async def _download(sftp: asyncssh.SFTPClient, source: str, part: Path, progress: Progress) -> str:
    """Copy `source` into `part`, returning the sha256 of what was written.

    Reads are issued in parallel and may complete out of order; blocks are written (and
    hashed) strictly in file order, in batches, by a thread, so a slow disk never stalls the
    event loop (the TUI). One batch is written while the next is received: the loop waits
    for the disk only when it falls a whole batch behind.
    """
    digest = hashlib.sha256()
    out: BinaryIO = await asyncio.to_thread(_create_private, part)
    writing: asyncio.Future[int] | None = None
    durable = False

    async def written() -> None:
        nonlocal writing
        if writing is not None:
            progress(await asyncio.shield(writing))  # never abandon a thread using the file
            writing = None

    try:
        block = sftp.limits.max_read_len or IN_FLIGHT
        requests = max(4, min(MAX_REQUESTS, IN_FLIGHT // block))
        async with (
            sftp.open(source, "rb", block_size=0) as remote_file,  # see `_blocks`
            contextlib.aclosing(_blocks(remote_file, block, requests)) as blocks,
        ):
            ahead: dict[int, bytes] = {}  # blocks that arrived before an earlier one
            batch: list[bytes] = []
            offset = pending = 0
            async for at, data in blocks:
                ahead[at] = data
                while (next_block := ahead.pop(offset, None)) is not None:
                    batch.append(next_block)
                    offset += len(next_block)
                    pending += len(next_block)
                if pending >= WRITE_BATCH:
                    await written()
                    writing = asyncio.ensure_future(asyncio.to_thread(_append, out, digest, batch))
                    batch, pending = [], 0
            if ahead:
                raise asyncssh.SFTPFailure(f"the server sent nothing for offset {offset}")
        await written()
        if batch:
            progress(await asyncio.to_thread(_append, out, digest, batch))
        durable = True
    finally:
        if writing is not None:
            await asyncio.wait([writing])
            if not writing.cancelled():
                writing.exception()  # reported already, or moot: the download failed
        await asyncio.to_thread(_close, out, durable)
    return digest.hexdigest()


async def read_file(sftp: asyncssh.SFTPClient, source: bytes | str) -> bytes:
    """A whole remote file in memory, read as `_download` reads it: several reads in flight,
    each awaited or cancelled however the read ends (asyncssh's own `read` of a large size
    left its parallel reads failing unheard when the link dropped)."""
    block = sftp.limits.max_read_len or IN_FLIGHT
    requests = max(4, min(MAX_REQUESTS, IN_FLIGHT // block))
    parts: dict[int, bytes] = {}
    async with (
        sftp.open(source, "rb", block_size=0, encoding=None) as remote_file,  # see `_blocks`
        contextlib.aclosing(_blocks(remote_file, block, requests)) as blocks,
    ):
        async for at, data in blocks:
            parts[at] = data
    return b"".join(parts[at] for at in sorted(parts))


async def _blocks(
    remote_file: asyncssh.SFTPClientFile, block: int, requests: int
) -> AsyncGenerator[tuple[int, bytes], None]:
    """(offset, data) of the whole file, read with `requests` reads of `block` bytes in
    flight, in the order they arrive. Every read started is awaited or cancelled before this
    ends, however it ends: asyncssh's `read_parallel` left its other reads to fail unheard
    when the link dropped under one ("Task exception was never retrieved" on stderr).

    `remote_file` must be opened with `block_size=0`: with a block size, asyncssh's `read`
    hands even one block to its own parallel reader, whose inner tasks a cancelled read
    leaves behind (the same message, at the end of a full test run); with 0 each read is one
    SFTP request, awaited here."""
    size = (await remote_file.stat()).size or 0
    pending: dict[asyncio.Task[bytes], tuple[int, int]] = {}
    next_at = 0

    def ask(at: int, length: int) -> None:
        pending[asyncio.ensure_future(remote_file.read(length, at))] = (at, length)

    try:
        while next_at < size or pending:
            while next_at < size and len(pending) < requests:
                length = min(block, size - next_at)
                ask(next_at, length)
                next_at += length
            done, _ = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                at, length = pending.pop(task)
                data = task.result()
                if not data:  # the file ended early: nothing more to ask for
                    next_at = size = min(size, at)
                    continue
                yield at, data
                if len(data) < length:  # a short read: ask for the rest
                    ask(at + len(data), length - len(data))
    finally:
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)


def _prepare(directory: Path, name: str, digest: str) -> tuple[Path, Outcome]:
    target, outcome = resolve_target(directory, name, digest)
    if outcome is not Outcome.UNCHANGED:
        directory.mkdir(parents=True, exist_ok=True)
    return target, outcome


def _unresolved(directory: Path, name: str) -> bool:
    """Nothing holds `name` yet: the file can be fetched before its digest is known."""
    if (directory / name).exists():
        return False
    directory.mkdir(parents=True, exist_ok=True)
    return True


DEFAULT_MODE = 0o644
"""A fetched file's mode when the host did not say (as the umask gave it before)."""


def _finish(part: Path, target: Path, mtime: float | None, mode: int | None) -> None:
    # The source's own bits, less what the umask takes (as scp does): a 0600 file stays 0600
    # (never widened to share it), a 0644 one is 0600 under umask 077.
    os.chmod(part, (DEFAULT_MODE if mode is None else mode & 0o777) & ~umask())
    if mtime is not None:
        os.utime(part, (mtime, mtime))
    publish_new(part, target)


def _place(
    part: Path, directory: Path, name: str, digest: str, mtime: float | None, mode: int | None
) -> tuple[Path, Outcome]:
    """Publish a verified `.part` fetched before its digest was known, now that it is."""
    target, outcome = resolve_target(directory, name, digest)
    if outcome is Outcome.UNCHANGED:  # the same content appeared meanwhile
        part.unlink()
    else:
        _finish(part, target, mtime, mode)
    return target, outcome


async def fetch(
    session: HostSession,
    sftp: asyncssh.SFTPClient,
    source: str,
    directory: Path,
    name: str,
    *,
    digest: str | HostDigests,
    size: int,
    mtime: float | None,
    progress: Progress,
    package: Path,
    mode: int | None = None,
) -> Placement:
    """Fetch one remote file the host says hashes to `digest` into `directory/name`.

    Already in the package (under either name): nothing is transferred. Otherwise the file
    goes through `.part`; a received hash that differs from the host's means the file changed
    while we read it, so the host is asked again and the copy retried once. With
    `HostDigests`, a file whose name is still free is fetched while the host hashes it.
    Raises `TransferError` (this file failed) or `Disconnected` (the link is gone: stop the
    host).
    """
    host = session.name

    async def host_digest() -> str:
        assert isinstance(digest, HostDigests)
        found = await digest.get(source)
        if found is None:
            raise TransferError(
                host, f"{shown_name(source)}: the host could not read it to hash it"
            )
        return found

    expected = digest if isinstance(digest, str) else None
    if expected is None and not await asyncio.to_thread(_unresolved, directory, name):
        expected = await host_digest()  # to tell content already there from new content
    for attempt in (1, 2):
        if expected is None:
            target, outcome = directory / name, Outcome.NEW
        else:
            target, outcome = await asyncio.to_thread(_prepare, directory, name, expected)
            if outcome is Outcome.UNCHANGED:
                return Placement(target, expected, size, outcome)
        part = target.with_name(target.name + PART_SUFFIX)
        shown = target.relative_to(package).as_posix()
        received = 0

        def counted(n: int) -> None:
            nonlocal received
            received += n
            progress(n)

        try:
            got = await _download(sftp, source, part, counted)
            if expected is None:
                expected = await host_digest()
                if got == expected:
                    target, outcome = await asyncio.to_thread(
                        _place, part, directory, name, expected, mtime, mode
                    )
                    return Placement(target, expected, received, outcome)
            elif got == expected:
                await asyncio.to_thread(_finish, part, target, mtime, mode)
                return Placement(target, expected, received, outcome)
        except (OSError, asyncssh.Error) as exc:
            part.unlink(missing_ok=True)
            where = f"{shown_name(source)} → {shown}"
            if _lost(exc):
                lost = f"connection lost after {human_size(received)} of {human_size(size)}"
                raise Disconnected(host, f"{where}: {lost}") from exc
            reason = exc.reason if isinstance(exc, asyncssh.SFTPError) else exc
            raise TransferError(host, f"{where}: {reason}") from exc
        except BaseException:
            part.unlink(missing_ok=True)
            raise
        part.unlink(missing_ok=True)
        fresh = (await remote_hashes(session, [source])).get(source)
        if attempt == 2 or fresh is None:
            raise TransferError(
                host,
                f"{shown_name(source)} → {shown}: received sha256 {got[:12]}…, the host says "
                f"{(fresh or expected)[:12]}… (the file keeps changing, or was corrupted)",
            )
        expected = fresh
    raise AssertionError("unreachable")
