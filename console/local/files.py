"""Writing a file so that a crash, a full disk or a concurrent writer never leaves half of it.

Every file specops writes goes the same way: the bytes into a temporary name in the target's
directory, flushed and fsynced, then published under the real name, then the directory
fsynced so the new name itself survives a crash. What differs is the publish rule:

- `publish_replacing`: the new file replaces whatever had the name (state, the manifest);
- `publish_new`: the name must be free and stays the first writer's (package evidence): a
  hard link, which fails if the name exists, with `os.replace` only where the filesystem
  has no hard links and the name is still free.

No I/O beyond the local filesystem, no Textual.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

Publish = Callable[[Path, Path], None]


def fsync_dir(directory: Path) -> None:
    """Make a rename or link in `directory` durable, not just the file's bytes."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def publish_replacing(part: Path, target: Path) -> None:
    """Give the finished temporary file `target`'s name, replacing what was there."""
    os.replace(part, target)
    fsync_dir(target.parent)


def publish_new(part: Path, target: Path) -> None:
    """Give the finished temporary file `target`'s name without replacing anything there."""
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
    fsync_dir(target.parent)


@functools.cache
def umask() -> int:
    """The process's umask, read without changing it (`os.umask` sets it to read it: a file
    another thread creates meanwhile would get the wrong mode)."""
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    old = os.umask(0o077)  # no /proc: the brief swap, with the strictest mode meanwhile
    os.umask(old)
    return old


def write_file(
    target: Path,
    content: bytes,
    publish: Publish,
    *,
    suffix: str = ".tmp",
    mode: int | None = None,
) -> None:
    """Write `content` to a temporary name beside `target`, fsync, then `publish` it.

    `mode` None keeps the temporary file's 0600 (private state); a `mode` is narrowed by the
    operator's umask, as any file a program creates (0644 stays 0600 under umask 077). The
    temporary name starts with a dot and ends in `suffix`, so a reader listing the directory
    can leave it out. On any failure the temporary file is removed and `target` is as it was.
    """
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=suffix)
    part = Path(tmp)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(content)
            fh.flush()
            if mode is not None:
                os.fchmod(fh.fileno(), mode & ~umask())  # 0644 asked, 0600 under umask 077
            os.fsync(fh.fileno())
        publish(part, target)
    except BaseException:
        part.unlink(missing_ok=True)
        raise


def write_atomic(path: Path, text: str) -> None:
    """Replace `path` with `text` in one step (its directory made 0700 if missing): readers
    see the old file or the new one."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    write_file(path, text.encode("utf-8"), publish_replacing)
