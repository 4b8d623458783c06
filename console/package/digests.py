"""The host's own SHA-256 of the files specops fetches, which every copy must match.

The host hashes with `openssl dgst -sha256 -r`, which uses the CPU's SHA instructions where
it has them (0.74 CPU-seconds per GiB on the development machine, coreutils' `sha256sum` 2.9),
and coreutils' `sha256sum` hashes whatever openssl did not: everything on a host without
openssl, and a file openssl could not read, so that the error is the usual one. Both print
`sha256sum -c` lines. `HostDigests` hashes a whole set in the background, in the order the
files will be fetched, so the host reads and hashes a file while it is being downloaded
instead of before; `remote_hashes` asks about a few files once.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterable, Sequence

from console.hosts import tasks
from console.package.manifest import format_line
from console.transport import remote
from console.transport.ssh import CommandFailed, HostSession, RemoteError

HASH_BATCH = 100
"""Paths per remote hashing command (far below any ARG_MAX)."""
HASH_BYTES = 32 << 20
"""Bytes per background hashing command (see `hash_batches`)."""
NOT_FOUND = 127
"""The shell's exit status for a command it cannot find."""
_HEX64 = re.compile(r"[0-9a-fA-F]{64}")


def parse_digests(lines: Iterable[str], batch: Sequence[str]) -> dict[str, str]:
    """Digest lines matched whole against the paths asked: `sha256sum`'s `HASH  NAME`, the
    name escaped like the manifest's, or `openssl dgst -r`'s `HASH *NAME`, the name as given
    (paths hold no line break, see remote.py)."""
    escaped_names = {format_line("", p).rstrip("\n"): p for p in batch}
    asked = set(batch)
    found: dict[str, str] = {}
    for line in lines:
        if line[64:66] == " *":
            digest, path = line[:64], line[66:]
            if path not in asked:
                continue
        else:
            escaped = line.startswith("\\")
            digest = line[1:65] if escaped else line[:64]
            rest = ("\\" if escaped else "") + line[65 if escaped else 64 :]
            if rest not in escaped_names:
                continue
            path = escaped_names[rest]
        if _HEX64.fullmatch(digest):
            found[path] = digest.lower()
    return found


RECHECK_TIMEOUT_S = 600.0
"""How long `remote_hashes` waits for the host before it gives up with a RemoteError."""


async def remote_hashes(session: HostSession, paths: Sequence[str]) -> dict[str, str]:
    """The host's own digest of each readable path (unreadable ones are left out)."""
    try:
        async with (
            asyncio.timeout(RECHECK_TIMEOUT_S),
            HostDigests(session, [(p, 0) for p in paths]) as digests,
        ):
            return {p: d for p in paths if (d := await digests.get(p)) is not None}
    except TimeoutError:
        wait = f"{RECHECK_TIMEOUT_S:.0f}s"
        raise RemoteError(session.name, f"hashing {len(paths)} file(s) took over {wait}") from None


def hash_batches(files: Sequence[tuple[str, int]]) -> list[list[str]]:
    """Split (path, size) pairs into hashing commands, keeping their order.

    A command covers at most HASH_BATCH paths and HASH_BYTES bytes (a bigger file gets one
    of its own): the hashers' output is block-buffered, so a file's line may only arrive when
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


ENDING_S = 10.0
"""How long a finished snapshot waits for the hashing command's own end before cancelling it."""


class HostDigests:
    """The host's digests of a set of files, computed while they are being fetched.

    Use as `async with HostDigests(session, [(path, size), …]) as digests:` and fetch the
    files in the same order: the host hashes them in that order (`hash_batches`) while they
    download, so the check costs no more than waiting for a digest the host has usually
    already printed. `get` gives None for a file the host could not read, and raises what
    went wrong with the host (`Disconnected`).
    """

    def __init__(self, session: HostSession, files: Sequence[tuple[str, int]]) -> None:
        self._session = session
        self._batches = hash_batches(files)
        self._found: dict[str, str | None] = {}
        self._changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> HostDigests:
        self._task = asyncio.create_task(self._hash(), name=f"digests:{self._session.name}")
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, *exc_info: object) -> None:
        assert self._task is not None
        if exc_type is None and not self._task.done():
            # Every digest used has arrived, but the command's exit status comes a moment after
            # its last line (later on a busy host): cancelling now would leave `openssl` in the
            # audit log as a command that never ended. A bounded wait lets it end as it does.
            await asyncio.wait({self._task}, timeout=ENDING_S)
        # Whatever it raised was (or will never be) reported through `get`.
        await tasks.stop(self._task)

    async def _hash(self) -> None:
        openssl = True
        try:
            for batch in self._batches:
                rest = batch
                if openssl:
                    rest, status = await self._ask(remote.openssl_sha256(batch), batch)
                    openssl = status != NOT_FOUND  # a host without it: sha256sum from now on
                if rest:
                    rest, _ = await self._ask(remote.sha256sum(rest), rest)
                for path in rest:
                    self._found[path] = None  # unreadable: sha256sum said why on stderr
                self._changed.set()
        finally:
            self._changed.set()

    async def _ask(self, command: remote.Command, batch: list[str]) -> tuple[list[str], int]:
        """Take `command`'s digests as they come; the paths it gave none for, its status."""
        status = 0
        try:
            async for lines in self._session.stream(command):
                self._found.update(parse_digests(lines, batch))
                self._changed.set()
        except CommandFailed as exc:
            status = exc.result.returncode  # 1: some file was unreadable; its line is missing
        return [p for p in batch if p not in self._found], status

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
