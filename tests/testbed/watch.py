"""Act the instant a file appears in a directory (inotify, real-time priority).

Killing "mid-write" by polling loses the race on a busy machine: the console writes a
drop-in to a temp name and renames it within a millisecond, and copies a bench file in a
fraction of a second. The watcher blocks in inotify at real-time priority, so it runs the
moment the kernel reports the file: the console is dead (or the link cut) before its next
step, which needs a network round trip, can happen.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import select
import signal
import struct
import time
from collections.abc import Callable
from pathlib import Path

from tests import pace

IN_CREATE = 0x100
IN_MOVED_TO = 0x80
_EVENT = struct.Struct("iIII")

_libc = ctypes.CDLL(None, use_errno=True)


def kill_on_file(pid: int, directory: Path, suffix: str, timeout: float) -> str | None:
    """SIGKILL `pid` the instant a file named `*suffix` appears in `directory`."""
    return on_file(directory, suffix, timeout, lambda: os.kill(pid, signal.SIGKILL))


def on_file(
    directory: Path, suffix: str, timeout: float, action: Callable[[], object]
) -> str | None:
    """Wait for a file whose name ends with `suffix` to be created or renamed into
    `directory`, then run `action` at once. Returns the name seen, None on timeout."""
    fd = _libc.inotify_init1(os.O_CLOEXEC)
    if fd < 0:
        raise OSError(ctypes.get_errno(), "inotify_init1")
    try:
        if _libc.inotify_add_watch(fd, bytes(directory), IN_CREATE | IN_MOVED_TO) < 0:
            raise OSError(ctypes.get_errno(), f"inotify_add_watch {directory}")
        with contextlib.suppress(PermissionError):  # root: run first when the event comes
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(50))
        deadline = pace.deadline(timeout)
        while (left := deadline - time.monotonic()) > 0:
            if not select.select([fd], [], [], left)[0]:
                break
            data = os.read(fd, 65536)
            offset = 0
            while offset < len(data):
                _wd, _mask, _cookie, length = _EVENT.unpack_from(data, offset)
                raw = data[offset + _EVENT.size : offset + _EVENT.size + length]
                name = raw.rstrip(b"\0").decode()
                offset += _EVENT.size + length
                if name.endswith(suffix):
                    action()
                    return name
        return None
    finally:
        with contextlib.suppress(OSError):
            os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
        os.close(fd)
