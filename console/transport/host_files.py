"""What specops keeps on a host, under `/var/lib/specops/UNIT/` (the profile's
`service.state_dir`), and how it gets there.

The host's history (console/tuning/history.py) and its experiment ledger
(console/ledger/ledger.py) live beside each other on the host, so every console and every
profile name that reaches the host sees the same record. Both are written the same way: the
directory made, the text written under a temporary name in it, then renamed over the target
(one rename(2): a reader sees the old file or the new one, never half of one), each step
through `sudo -n` when the profile says so (console/transport/remote.py).
"""

from __future__ import annotations

import posixpath
import re
import secrets

from console.transport import remote
from console.transport.ssh import CommandFailed, HostSession, RemoteError

STATE_ROOT = "/var/lib/specops"
NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*\.json")
"""The files `read_json_files` returns: plain names only (what specops itself writes)."""


def unit_state_dir(unit: str, root: str) -> str:
    """`ROOT/UNIT`, ROOT the profile's `service.state_dir` (`/var/lib/specops` unless it says
    otherwise; the unit name is validated before it becomes a path)."""
    remote.systemctl_cat(unit)
    return posixpath.join(root, unit)


class StateDirRefused(RemoteError):
    """The host's state directory cannot be written: no change may start there."""


async def state_refused(session: HostSession) -> str | None:
    """None when the host's state directory for the unit can be written (or made); else what
    to tell the operator, naming the directory that refuses writes."""
    service = session.profile.service
    directory = unit_state_dir(service.unit, service.state_dir)
    result = await session.run(remote.writable(directory), timeout=30, check=False)
    if result.returncode == 0:
        return None
    refused = result.stdout.strip() or directory
    return (
        f"{directory} cannot be written ({refused} refuses writes: read-only, or no "
        "permission); specops records every change there before it restarts anything — "
        "set service.state_dir in the profile to a writable directory"
    )


async def check_state_dir(session: HostSession) -> None:
    """StateDirRefused unless the host's state directory can be written."""
    if (refused := await state_refused(session)) is not None:
        raise StateDirRefused(session.name, refused)


async def replace_file(session: HostSession, path: str, text: str) -> str:
    """Write `text` to `path` on the host in one step (temp name in the same directory, then
    rename), readable by its owner only (0600); returns `path`. The temporary name is
    `.NAME.RANDOM.tmp`, this write's own: two consoles writing one file (two watches
    recording one probation crash) each rename their own copy, where a shared `.NAME.tmp`
    had the second `mv` find nothing (`cannot stat`) and its rollback stop half way."""
    directory = posixpath.dirname(path)
    tmp = posixpath.join(directory, f".{posixpath.basename(path)}.{secrets.token_hex(4)}.tmp")
    await session.run(remote.make_dirs(directory))
    await session.run(remote.create_private(tmp))  # 0600 before a byte is written
    await session.run(remote.write_file(tmp, text))
    await session.run(remote.move(tmp, path))
    return path


async def read_json_files(session: HostSession, directory: str) -> list[tuple[str, str]]:
    """(name, text) of every `*.json` file in `directory` on the host, by name; [] when the
    directory does not exist. The text comes without its line breaks (JSON needs none:
    one inside a string is always escaped), one file per line on the wire."""
    command = remote.read_json_files(directory)
    result = await session.run(command, check=False, timeout=120)
    if result.returncode != 0:
        raise CommandFailed(session.name, result)
    lines = result.stdout.split("\n")
    found: list[tuple[str, str]] = []
    for name, text in zip(lines[0::2], lines[1::2], strict=False):
        if NAME_RE.fullmatch(name):
            found.append((name, text))
    return sorted(found)
