"""Which host files a profile's bench globs collect, each odd one skipped by name.

A bench directory on a real host is not ours: it can hold dangling symlinks, links out to
/etc/shadow, files of any size and names of any bytes. Every match is judged on its own
(console/package/names.py decides its name), so one odd file is a note naming it and never
costs its siblings; the glob is done here, over bytes, because asyncssh's own refuses a
whole directory with one backslash or non-UTF-8 name in it ("Invalid filename").
"""

from __future__ import annotations

import fnmatch
import posixpath
import stat
from dataclasses import dataclass
from typing import Protocol

import asyncssh

from console.hosts.profiles import ArtifactsConfig
from console.package.names import RefusedName, package_name, shown
from console.package.transfer import human_size
from console.transport.ssh import Disconnected, HostSession

WILDCARDS = "*?["


class Findings(Protocol):
    """Where the notes and errors of one host's snapshot go (`HostSnapshot`)."""

    notes: list[str]
    errors: list[str]


async def host_glob(sftp: asyncssh.SFTPClient, pattern: str) -> list[bytes]:
    """The host paths `pattern` matches, as bytes, in sorted order.

    `*`, `?` and `[…]` match within one path component (not a leading `.`, as in the shell);
    `**` matches any number of directories. A component without wildcards is taken as is.
    """
    parts = pattern.encode().split(b"/")
    current = [b"/" if pattern.startswith("/") else b""]
    for part in parts:
        if not part:
            continue
        if not any(c in part.decode() for c in WILDCARDS):
            current = [posixpath.join(d, part) for d in current]
            continue
        found: list[bytes] = []
        for directory in current:
            found.extend(await _matching(sftp, directory, part))
        current = found
    return sorted(set(p for p in current if p not in (b"", b"/")))


async def _matching(sftp: asyncssh.SFTPClient, directory: bytes, part: bytes) -> list[bytes]:
    try:
        entries = [e async for e in sftp.scandir(directory or b".")]
    except (asyncssh.SFTPNoSuchFile, asyncssh.SFTPNoSuchPath, asyncssh.SFTPFailure):
        return []  # not a directory, or gone: nothing matches under it
    names = [e.filename for e in entries if isinstance(e.filename, bytes)]
    names = [n for n in names if n not in (b".", b"..")]
    if part == b"**":
        found = [directory]
        for entry in entries:
            name = entry.filename
            is_dir = entry.attrs.type == asyncssh.FILEXFER_TYPE_DIRECTORY
            if isinstance(name, bytes) and name not in (b".", b"..") and is_dir:
                found.extend(await _matching(sftp, posixpath.join(directory, name), part))
        return found
    return [
        posixpath.join(directory, n)
        for n in names
        if fnmatch.fnmatchcase(n, part) and (part.startswith(b".") or not n.startswith(b"."))
    ]


@dataclass(frozen=True)
class Bench:
    source: str
    size: int
    mtime: float | None
    mode: int | None
    """The source's permission bits, kept on the copy (never widened)."""
    name: str
    """Its name in the package (console/package/names.py)."""


def _text(name: bytes | str) -> str:
    """A host path as str; bytes that are not UTF-8 kept (surrogateescape), for names.py."""
    return name.decode("utf-8", "surrogateescape") if isinstance(name, bytes) else name


def _glob_base(pattern: str) -> str:
    """The directory a glob names before its first wildcard: where its symlinks may point."""
    parts = pattern.split("/")
    for i, part in enumerate(parts):
        if any(c in part for c in "*?["):
            return "/".join(parts[:i]) or ("/" if pattern.startswith("/") else ".")
    return posixpath.dirname(pattern) or "."


async def bench_files(
    session: HostSession,
    sftp: asyncssh.SFTPClient,
    artifacts: ArtifactsConfig,
    result: Findings,
) -> list[Bench]:
    """The regular files the globs match on the host, sorted; each odd one skipped by name.

    Every match is looked at on its own: a dangling symlink, a link out of the bench
    directory, a file over the size cap or a name the package cannot hold is a note naming
    that file, and the later matches still count.
    """
    found: dict[str, Bench] = {}
    for pattern in artifacts.bench:
        try:
            matches = await host_glob(sftp, pattern)
            base = _text(await sftp.realpath(_glob_base(pattern).encode()))
        except asyncssh.SFTPNoSuchFile:
            matches = []
        except asyncssh.SFTPError as exc:
            result.errors.append(f"{pattern}: {exc.reason}")
            continue
        except (OSError, asyncssh.Error) as exc:
            raise Disconnected(session.name, f"listing {pattern}: {exc}") from exc
        missing = 0
        for raw in matches:
            path = _text(raw)
            try:
                bench = await _examine(sftp, path, base, artifacts, result)
            except asyncssh.SFTPNoSuchFile:
                missing += 1  # a pattern without wildcards names a file that is not there
                continue
            except asyncssh.SFTPError as exc:
                result.notes.append(f"{shown(path)}: skipped: {exc.reason}")
                continue
            except (OSError, asyncssh.Error) as exc:
                raise Disconnected(session.name, f"listing {shown(path)}: {exc}") from exc
            if bench is not None:
                found[path] = bench
        if missing == len(matches):
            result.notes.append(f"{pattern}: no file matches")
    return [found[p] for p in sorted(found)]


async def _examine(
    sftp: asyncssh.SFTPClient,
    path: str,
    base: str,
    artifacts: ArtifactsConfig,
    result: Findings,
) -> Bench | None:
    """One glob match: a file to fetch, or None (a directory, or skipped with a note)."""
    raw = path.encode("utf-8", "surrogateescape")
    link = await sftp.lstat(raw)
    if link.permissions is not None and stat.S_ISLNK(link.permissions):
        try:
            attrs = await sftp.stat(raw)
        except asyncssh.SFTPNoSuchFile:
            result.notes.append(f"{shown(path)}: skipped: a dangling symlink")
            return None
        target = _text(await sftp.realpath(raw))
        inside = target.startswith(base.rstrip("/") + "/")
        if not inside and not artifacts.bench_symlinks_anywhere:
            result.notes.append(
                f"{shown(path)}: skipped: a symlink to {shown(target)}, outside {shown(base)} "
                "(artifacts.bench_symlinks_anywhere = true follows it)"
            )
            return None
    else:
        attrs = link
    if attrs.permissions is None or not stat.S_ISREG(attrs.permissions):
        return None
    size = attrs.size or 0
    if size > artifacts.max_file_bytes:
        result.notes.append(
            f"{shown(path)}: skipped: {human_size(size)} is over the per-file cap "
            f"artifacts.max_file_bytes = {human_size(artifacts.max_file_bytes)}"
        )
        return None
    try:
        name = package_name(posixpath.basename(path))
    except RefusedName as exc:
        result.notes.append(f"{shown(path)}: skipped: {exc}")
        return None
    if name != posixpath.basename(path):
        result.notes.append(f"{shown(path)}: kept as {shown(name)} (a name ending in .part)")
    return Bench(path, size, attrs.mtime, stat.S_IMODE(attrs.permissions), name)
