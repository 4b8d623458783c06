"""What the unit's main process really runs: its argv and environment, from /proc.

After an interrupted change the unit files (what `systemctl cat` shows and `flags` reads) may
not be what runs: a drop-in written but not reloaded (NeedDaemonReload=yes), or reloaded but
never restarted (NeedDaemonReload=no, yet the old process still runs). The main process's
`/proc/PID/cmdline` and `environ` are what it was started with, whatever the files say now.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from console.hosts.profiles import FlagValue, Profile
from console.service.flags import read_flags
from console.transport import remote
from console.transport.ssh import HostSession


@dataclass(frozen=True)
class RunningCommand:
    pid: int
    argv: tuple[str, ...]
    environment: Mapping[str, str]

    def flags(self, profile: Profile) -> dict[str, FlagValue]:
        """The profile's flag values as this process was started with them."""
        return dict(read_flags(profile.flags, list(self.argv), dict(self.environment)))


def _nul_list(text: str) -> list[str]:
    """/proc's NUL-separated lists (each item NUL-terminated)."""
    items = text.split("\0")
    return items[:-1] if items and items[-1] == "" else items


async def read_running(session: HostSession, unit: str) -> RunningCommand | None:
    """The unit's main process now (None when it has none); raises RemoteError."""
    show = await session.run(remote.systemctl_show(unit, ("MainPID",)), timeout=20)
    pid = int(remote.parse_show(show.stdout).get("MainPID") or 0)
    if pid <= 0:
        return None
    cmdline = await session.run(remote.read_file(f"/proc/{pid}/cmdline"), timeout=20)
    argv = _nul_list(cmdline.stdout)
    environ = await session.run(remote.read_file(f"/proc/{pid}/environ"), check=False, timeout=20)
    env = dict(item.split("=", 1) for item in _nul_list(environ.stdout) if "=" in item)
    return RunningCommand(pid, tuple(argv), env)
