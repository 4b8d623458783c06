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
"""

from __future__ import annotations

import asyncio
import errno
import hashlib
import os
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import BinaryIO

import asyncssh

from console import remote
from console.manifest import PART_SUFFIX, format_line, hash_file
from console.ssh import Disconnected, HostSession, RemoteError

CHUNK = 4 << 20
"""Bytes per SFTP read; asyncssh splits each read into parallel requests underneath."""
HASH_BATCH = 100
"""Paths per remote `sha256sum` command (far below any ARG_MAX)."""

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


def _publish(part: Path, target: Path) -> None:
    """Give the finished `.part` its name without replacing anything already there."""
    try:
        os.link(part, target)
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EXDEV, errno.EMLINK):
            raise
        if target.exists():
            raise FileExistsError(errno.EEXIST, "appeared while writing", str(target)) from exc
        os.replace(part, target)
    else:
        part.unlink()
    fd = os.open(target.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)  # the new name itself survives a crash, not just the bytes
    finally:
        os.close(fd)


def write_bytes(directory: Path, name: str, content: bytes) -> Placement:
    """Put generated content (an excerpt, a unit file, metadata) into the package."""
    digest = hashlib.sha256(content).hexdigest()
    target, outcome = resolve_target(directory, name, digest)
    if outcome is not Outcome.UNCHANGED:
        directory.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{name}.", suffix=PART_SUFFIX)
        part = Path(tmp)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(content)
                f.flush()
                os.fchmod(f.fileno(), 0o644)
                os.fsync(f.fileno())
            _publish(part, target)
        except BaseException:
            part.unlink(missing_ok=True)
            raise
    return Placement(target, digest, len(content), outcome)


# --- remote files ------------------------------------------------------------------------


async def remote_hashes(session: HostSession, paths: Sequence[str]) -> dict[str, str]:
    """The host's own `sha256sum` of each readable path (unreadable ones are left out)."""
    found: dict[str, str] = {}
    for start in range(0, len(paths), HASH_BATCH):
        batch = list(paths[start : start + HASH_BATCH])
        result = await session.run(remote.sha256sum(batch), check=False, timeout=600)
        # sha256sum prints `HASH  NAME`, escaped like the manifest; match each line whole.
        expected = {format_line("", p).rstrip("\n"): p for p in batch}
        for line in result.stdout.splitlines():
            escaped = line.startswith("\\")
            digest = line[1:65] if escaped else line[:64]
            rest = ("\\" if escaped else "") + line[65 if escaped else 64 :]
            path = expected.get(rest)
            if path is not None and len(digest) == 64:
                found[path] = digest.lower()
    return found


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


def _append(out: BinaryIO, digest: hashlib._Hash, data: bytes) -> None:
    out.write(data)
    digest.update(data)


def _close(out: BinaryIO, durable: bool) -> None:
    try:
        if durable:
            out.flush()
            os.fsync(out.fileno())
    finally:
        out.close()


async def _download(sftp: asyncssh.SFTPClient, source: str, part: Path, progress: Progress) -> str:
    """Copy `source` into `part`, returning the sha256 of what was written.

    Local disk work runs in a thread so a slow disk never stalls the event loop (the TUI).
    """
    digest = hashlib.sha256()
    out: BinaryIO = await asyncio.to_thread(part.open, "wb")
    durable = False
    try:
        async with sftp.open(source, "rb") as remote_file:
            while data := await remote_file.read(CHUNK):
                assert isinstance(data, bytes)  # binary mode; the stubs say AnyStr
                await asyncio.to_thread(_append, out, digest, data)
                progress(len(data))
        durable = True
    finally:
        await asyncio.to_thread(_close, out, durable)
    return digest.hexdigest()


def _prepare(directory: Path, name: str, digest: str) -> tuple[Path, Outcome]:
    target, outcome = resolve_target(directory, name, digest)
    if outcome is not Outcome.UNCHANGED:
        directory.mkdir(parents=True, exist_ok=True)
    return target, outcome


def _finish(part: Path, target: Path, mtime: float | None) -> None:
    if mtime is not None:
        os.utime(part, (mtime, mtime))
    _publish(part, target)


async def fetch(
    session: HostSession,
    sftp: asyncssh.SFTPClient,
    source: str,
    directory: Path,
    name: str,
    *,
    digest: str,
    size: int,
    mtime: float | None,
    progress: Progress,
    package: Path,
) -> Placement:
    """Fetch one remote file the host says hashes to `digest` into `directory/name`.

    Already in the package (under either name): nothing is transferred. Otherwise the file
    goes through `.part`; a received hash that differs from the host's means the file changed
    while we read it, so the host is asked again and the copy retried once. Raises
    `TransferError` (this file failed) or `Disconnected` (the link is gone: stop the host).
    """
    host = session.name
    for attempt in (1, 2):
        target, outcome = await asyncio.to_thread(_prepare, directory, name, digest)
        if outcome is Outcome.UNCHANGED:
            return Placement(target, digest, size, outcome)
        part = target.with_name(target.name + PART_SUFFIX)
        shown = target.relative_to(package).as_posix()
        received = 0

        def counted(n: int) -> None:
            nonlocal received
            received += n
            progress(n)

        try:
            got = await _download(sftp, source, part, counted)
            if got == digest:
                await asyncio.to_thread(_finish, part, target, mtime)
                return Placement(target, digest, received, outcome)
        except (OSError, asyncssh.Error) as exc:
            part.unlink(missing_ok=True)
            where = f"{source} → {shown}"
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
                f"{source} → {shown}: received sha256 {got[:12]}…, the host says "
                f"{(fresh or digest)[:12]}… (the file keeps changing, or was corrupted)",
            )
        digest = fresh
    raise AssertionError("unreachable")
