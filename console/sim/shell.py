"""The simulated host's `sh`: it runs exactly the scripts in specops' remote vocabulary.

specops sends one shell script (`console.transport.remote.READ_IF_EXISTS`, for the host's
history file); anything else is refused the way a locked-down host would, so a new script in
the console fails its tests until the simulator learns it too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import asyncssh

from console.transport.remote import READ_IF_EXISTS

if TYPE_CHECKING:
    from console.sim.host import SimHost


async def sh(host: SimHost, process: asyncssh.SSHServerProcess[str], argv: list[str]) -> int:
    if len(argv) != 5 or argv[1:4] != ["-c", READ_IF_EXISTS, "sh"]:
        process.stderr.write(f"sh: the simulated host runs no script like {argv[1:3]!r}\n")
        return 2
    path = host.local(argv[4])
    if not path.exists():
        return 0
    try:
        process.stdout.write(path.read_text())
    except OSError as exc:
        process.stderr.write(f"cat: {argv[4]}: {exc.strerror}\n")
        return 1
    return 0
