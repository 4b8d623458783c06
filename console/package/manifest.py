"""A `sha256sum`-compatible manifest for a reproduction package directory.

A package is proof of what ran, so anyone must be able to check it with nothing but coreutils:
`cd PACKAGE && sha256sum --strict -c MANIFEST.sha256`. The manifest is deterministic (relative
POSIX paths sorted by raw bytes, lowercase hex, no timestamp), so an unchanged package gives a
byte-identical manifest and rewriting it is a no-op. Run metadata lives in a JSON file that the
manifest lists, never in the manifest itself.

What a manifest covers, by decision:

- every regular file under the root, recursively, without following symlinks;
- not the root's own `MANIFEST.sha256` (a nested one is an ordinary file of the package);
- not `*.part` files, which are downloads or rewrites still in flight;
- not symlinks (to files or directories): they may point outside the package, and
  `sha256sum -c` would follow them, so a package is self-contained or it is not a package;
- not FIFOs, sockets or device nodes (reading one may block forever).

Names are escaped exactly like coreutils 9.1: a name holding a backslash, newline or carriage
return gets a leading `\\` on its line and `\\` -> `\\\\`, LF -> `\\n`, CR -> `\\r`. A top-level
file named `-` is written `./-`, since a bare `-` makes `sha256sum -c` read standard input.
Names are handled as `os.fsdecode` strings, so bytes that are not UTF-8 round-trip unchanged.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from console.local.files import publish_replacing, write_file

MANIFEST_NAME = "MANIFEST.sha256"
PART_SUFFIX = ".part"
CHUNK_SIZE = 1 << 20

StrPath = str | os.PathLike[str]

_HEX = frozenset("0123456789abcdefABCDEF")
_DIGEST_LEN = 64
_ESCAPES = {"\\": "\\\\", "\n": "\\n", "\r": "\\r"}
_UNESCAPES = {"\\": "\\", "n": "\n", "r": "\r"}


@dataclass(frozen=True)
class MalformedLine:
    """A manifest line `verify` could not use, with its 1-based number and the reason."""

    lineno: int
    text: str
    reason: str


@dataclass(frozen=True)
class VerifyReport:
    """What `verify` found; every path is relative POSIX, in manifest (raw byte) order."""

    ok: tuple[str, ...]
    """Listed and present with the listed hash."""
    mismatched: tuple[str, ...]
    """Listed and present, but the content hashes differently."""
    missing: tuple[str, ...]
    """Listed, but no regular file of the package is at that path."""
    unlisted: tuple[str, ...]
    """Present and covered by the manifest rules, but not listed."""
    malformed: tuple[MalformedLine, ...]
    """Lines that are not `HASH  PATH` for a path inside the package (in file order)."""

    @property
    def clean(self) -> bool:
        """True when the package is exactly what its manifest says."""
        return not (self.mismatched or self.missing or self.unlisted or self.malformed)


def hash_file(path: StrPath) -> str:
    """Lowercase hex SHA-256 of a file, read in 1 MiB chunks so size never matters."""
    digest = hashlib.sha256()
    buffer = bytearray(CHUNK_SIZE)
    view = memoryview(buffer)
    with open(path, "rb", buffering=0) as f:
        while n := f.readinto(buffer):
            digest.update(view[:n])
    return digest.hexdigest()


def is_excluded(relpath: str) -> bool:
    """True for the paths a manifest never covers: the root manifest and `*.part` files."""
    return relpath == MANIFEST_NAME or relpath.rsplit("/", 1)[-1].endswith(PART_SUFFIX)


def package_files(root: StrPath) -> list[str]:
    """Relative POSIX paths of the regular files the manifest covers, sorted by raw bytes."""
    found: list[str] = []
    stack: list[tuple[str, str]] = [(os.fspath(root), "")]
    while stack:
        directory, prefix = stack.pop()
        with os.scandir(directory) as entries:
            for entry in entries:
                rel = prefix + entry.name
                if entry.is_dir(follow_symlinks=False):
                    stack.append((entry.path, rel + "/"))
                elif entry.is_file(follow_symlinks=False) and not is_excluded(rel):
                    found.append(rel)
    found.sort(key=os.fsencode)
    return found


def format_line(digest: str, relpath: str) -> str:
    """One manifest line, escaped the way `sha256sum` escapes it."""
    name = "./-" if relpath == "-" else relpath
    if any(c in name for c in _ESCAPES):
        escaped = "".join(_ESCAPES.get(c, c) for c in name)
        return f"\\{digest}  {escaped}\n"
    return f"{digest}  {name}\n"


def package_digests(root: StrPath) -> dict[str, str]:
    """Relative path → SHA-256 of every covered file, in manifest order; each hashed once."""
    base = os.fspath(root)
    return {rel: hash_file(os.path.join(base, rel)) for rel in package_files(base)}


def render_manifest(digests: dict[str, str]) -> str:
    """The manifest text for these digests (already in manifest order)."""
    return "".join(format_line(digest, rel) for rel, digest in digests.items())


def build_manifest(root: StrPath) -> str:
    """The manifest text for `root` as it is now; hashes every covered file once."""
    return render_manifest(package_digests(root))


def _publish_manifest(target: Path, content: bytes) -> bool:
    try:
        if target.read_bytes() == content:
            return False
    except FileNotFoundError:
        pass  # no manifest yet: write one
    # The temporary name ends in .part, so a concurrent build never lists it.
    write_file(target, content, publish_replacing, suffix=PART_SUFFIX, mode=0o644)
    return True


def write_manifest(root: StrPath) -> bool:
    """Write `root/MANIFEST.sha256` atomically; False (file untouched) if already identical."""
    base = Path(root)
    return _publish_manifest(base / MANIFEST_NAME, os.fsencode(build_manifest(base)))


@dataclass(frozen=True)
class ManifestChanges:
    """How the package differs from what its manifest listed; paths in manifest order."""

    added: tuple[str, ...]
    """Covered files the manifest did not list."""
    changed: tuple[str, ...]
    """Listed files whose content now hashes differently."""
    removed: tuple[str, ...]
    """Listed paths with no covered file any more."""
    unchanged: int
    malformed: tuple[MalformedLine, ...]
    """Lines of the old manifest that could not be read (they are dropped on rewrite)."""
    had_manifest: bool
    written: bool
    """True when MANIFEST.sha256 was (re)written; never on a dry run."""

    @property
    def any(self) -> bool:
        """True when a rewrite changes what the manifest says."""
        return bool(self.added or self.changed or self.removed or self.malformed) or (
            not self.had_manifest
        )


def refresh_manifest(root: StrPath, *, dry_run: bool = False) -> ManifestChanges:
    """Rewrite `root/MANIFEST.sha256` over the package as it is now (after hand edits).

    Every covered file is hashed once; the old manifest (if any) is only read, to say what was
    added, changed and removed. `dry_run` writes nothing. The rewrite is the same atomic,
    byte-deterministic one every snapshot does, so `sha256sum -c` passes afterwards.
    """
    base = Path(root)
    target = base / MANIFEST_NAME
    try:
        listed, malformed = _read_listed(target.read_bytes())
        had = True
    except FileNotFoundError:
        listed, malformed, had = {}, [], False
    digests = package_digests(base)
    order = os.fsencode
    added = sorted((r for r in digests if r not in listed), key=order)
    removed = sorted((r for r in listed if r not in digests), key=order)
    changed = sorted((r for r in digests if r in listed and listed[r] != digests[r]), key=order)
    written = False
    if not dry_run:
        written = _publish_manifest(target, os.fsencode(render_manifest(digests)))
    return ManifestChanges(
        added=tuple(added),
        changed=tuple(changed),
        removed=tuple(removed),
        unchanged=len(digests) - len(added) - len(changed),
        malformed=tuple(malformed),
        had_manifest=had,
        written=written,
    )


def parse_line(line: str) -> tuple[str, str]:
    """Split one manifest line (no trailing newline) into (lowercase digest, relative path).

    Accepts what coreutils writes in its default form: an optional leading `\\` that switches
    on unescaping, 64 hex digits, a space, then a space (text) or `*` (binary) and the name.
    A leading `./` and `.` or empty segments are normalised away. Raises ValueError with the
    reason for anything else, including paths that would leave the package.
    """
    escaped = line.startswith("\\")
    body = line[1:] if escaped else line
    digest = body[:_DIGEST_LEN]
    sep = body[_DIGEST_LEN : _DIGEST_LEN + 2]
    name = body[_DIGEST_LEN + 2 :]
    if len(digest) != _DIGEST_LEN or not _HEX.issuperset(digest):
        raise ValueError("expected 64 hex digits")
    if sep not in ("  ", " *"):
        raise ValueError("expected two spaces (or ' *') after the hash")
    if escaped:
        name = _unescape(name)
    if "\0" in name:
        raise ValueError("NUL in file name")
    if name.startswith("/"):
        raise ValueError("absolute path")
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise ValueError("path leaves the package")
    if not parts:
        raise ValueError("empty file name")
    return digest.lower(), "/".join(parts)


def _unescape(name: str) -> str:
    out: list[str] = []
    chars = iter(name)
    for c in chars:
        if c != "\\":
            out.append(c)
            continue
        nxt = next(chars, "")
        if nxt not in _UNESCAPES:
            raise ValueError(f"invalid escape \\{nxt}" if nxt else "trailing backslash")
        out.append(_UNESCAPES[nxt])
    return "".join(out)


def _read_listed(raw: bytes) -> tuple[dict[str, str], list[MalformedLine]]:
    """The (path → digest) entries of a manifest's bytes, and the lines that are not entries."""
    listed: dict[str, str] = {}
    malformed: list[MalformedLine] = []
    for lineno, raw_line in enumerate(raw.split(b"\n"), start=1):
        text = os.fsdecode(raw_line.removesuffix(b"\r"))
        if not text or text.startswith("#"):
            continue
        try:
            digest, rel = parse_line(text)
            if rel in listed:
                raise ValueError("duplicate entry")
            if is_excluded(rel):
                raise ValueError("lists a file manifests never cover")
        except ValueError as exc:
            malformed.append(MalformedLine(lineno, text, str(exc)))
            continue
        listed[rel] = digest
    return listed, malformed


def verify(root: StrPath) -> VerifyReport:
    """Check `root` against its manifest, hashing only files that are listed and present.

    Like `sha256sum -c`, blank lines and `#` comments are skipped and a trailing CR is dropped.
    Unlike it, a second entry for the same path, or one for an excluded path (the manifest, a
    `*.part`), is malformed. A listed path is only ever opened if the package walk found a
    regular file there, so a manifest can never make `verify` read outside the package or
    through a symlink. Raises FileNotFoundError if there is no manifest; other OSErrors
    (e.g. an unreadable file) propagate.
    """
    base = os.fspath(root)
    with open(os.path.join(base, MANIFEST_NAME), "rb") as f:
        raw = f.read()
    present = set(package_files(base))
    listed, malformed = _read_listed(raw)
    ok: list[str] = []
    mismatched: list[str] = []
    missing: list[str] = []
    for rel in sorted(listed, key=os.fsencode):
        if rel not in present:
            missing.append(rel)
            continue
        try:
            actual = hash_file(os.path.join(base, rel))
        except FileNotFoundError:  # deleted since the walk
            missing.append(rel)
            continue
        (ok if actual == listed[rel] else mismatched).append(rel)
    unlisted = sorted(present.difference(listed), key=os.fsencode)
    return VerifyReport(
        ok=tuple(ok),
        mismatched=tuple(mismatched),
        missing=tuple(missing),
        unlisted=tuple(unlisted),
        malformed=tuple(malformed),
    )
