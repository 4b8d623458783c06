"""The host's own `sha256sum` of the files specops fetches, which every copy must match.

`remote_hashes` asks once (to re-check one file); `HostDigests` hashes a whole set in the
background, in the order the files will be fetched, so the host reads and hashes a file
while it is being downloaded instead of before. Every command is `remote.sha256sum`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable, Sequence

from console import remote
from console.manifest import format_line
from console.ssh import CommandFailed, HostSession, RemoteError

HASH_BATCH = 100
"""Paths per remote `sha256sum` command (far below any ARG_MAX)."""
HASH_BYTES = 32 << 20
"""Bytes per background `sha256sum` command (see `hash_batches`)."""


def _parse_sha256sum(lines: Iterable[str], batch: Sequence[str]) -> dict[str, str]:
    """`HASH  NAME` lines, escaped like the manifest, matched whole against the paths asked."""
    expected = {format_line("", p).rstrip("\n"): p for p in batch}
    found: dict[str, str] = {}
    for line in lines:
        escaped = line.startswith("\\")
        digest = line[1:65] if escaped else line[:64]
        rest = ("\\" if escaped else "") + line[65 if escaped else 64 :]
        path = expected.get(rest)
        if path is not None and len(digest) == 64:
            found[path] = digest.lower()
    return found


async def remote_hashes(session: HostSession, paths: Sequence[str]) -> dict[str, str]:
    """The host's own `sha256sum` of each readable path (unreadable ones are left out)."""
    found: dict[str, str] = {}
    for start in range(0, len(paths), HASH_BATCH):
        batch = list(paths[start : start + HASH_BATCH])
        result = await session.run(remote.sha256sum(batch), check=False, timeout=600)
        found.update(_parse_sha256sum(result.stdout.splitlines(), batch))
    return found


def hash_batches(files: Sequence[tuple[str, int]]) -> list[list[str]]:
    """Split (path, size) pairs into `sha256sum` commands, keeping their order.

    A command covers at most HASH_BATCH paths and HASH_BYTES bytes (a bigger file gets one
    of its own): sha256sum's output is block-buffered, so a file's line may only arrive when
    its command ends, and that should be soon after the host has read it.
    """
    batches: list[list[str]] = []
    batch: list[str] = []
    size = 0
    for path, n in dict(files).items():
        if batch and (len(batch) == HASH_BATCH or size + n > HASH_BYTES):
            batches.append(batch)
            batch, size = [], 0
        batch.append(path)
        size += n
    if batch:
        batches.append(batch)
    return batches


class HostDigests:
    """The host's `sha256sum` of a set of files, computed while they are being fetched.

    Use as `async with HostDigests(session, [(path, size), …]) as digests:` and fetch the
    files in the same order: the host hashes them in that order (`hash_batches`) while they
    download, so the check costs no more than waiting for a digest the host has usually
    already printed. `get` gives None for a file sha256sum could not read, and raises what
    went wrong with the host (`Disconnected`).
    """

    def __init__(self, session: HostSession, files: Sequence[tuple[str, int]]) -> None:
        self._session = session
        self._batches = hash_batches(files)
        self._found: dict[str, str | None] = {}
        self._changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> HostDigests:
        self._task = asyncio.create_task(self._hash(), name=f"sha256sum:{self._session.name}")
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        assert self._task is not None
        self._task.cancel()
        # Whatever it raised was (or will never be) reported through `get`.
        with contextlib.suppress(asyncio.CancelledError, RemoteError):
            await self._task

    async def _hash(self) -> None:
        try:
            for batch in self._batches:
                try:
                    async for lines in self._session.stream(remote.sha256sum(batch)):
                        self._found.update(_parse_sha256sum(lines, batch))
                        self._changed.set()
                except CommandFailed:
                    pass  # exit 1: some file was unreadable; its line is missing
                for path in batch:
                    self._found.setdefault(path, None)
                self._changed.set()
        finally:
            self._changed.set()

    async def get(self, path: str) -> str | None:
        """The host's digest of `path` (one of the paths given), waiting for it if need be."""
        assert self._task is not None, "use HostDigests as an async context manager"
        while path not in self._found:
            if self._task.done():
                self._task.result()  # re-raises the host's failure
                raise KeyError(path)
            self._changed.clear()
            await self._changed.wait()
        return self._found[path]
