"""The simulated host's `sh`: it runs exactly the scripts in specops' remote vocabulary.

specops sends four shell scripts (console/transport/remote.py): `READ_IF_EXISTS`, for the
host's history file, `READ_JSON_FILES`, for its experiment ledger's directory,
`WRITABLE`, whether its state directory can be written, and `CLAIM`, the one console that
rolls a probation crash back; anything
else is refused the way a locked-down host would, so a new script in the console fails its
tests until the simulator learns it too.
"""

from __future__ import annotations

import posixpath
from typing import TYPE_CHECKING

import asyncssh

from console.transport.remote import (
    CLAIM,
    CLAIMED_ALREADY,
    READ_IF_EXISTS,
    READ_JSON_FILES,
    WRITABLE,
)

if TYPE_CHECKING:
    from console.sim.host import SimHost


async def sh(host: SimHost, process: asyncssh.SSHServerProcess[str], argv: list[str]) -> int:
    if len(argv) == 5 and argv[1:4] == ["-c", READ_IF_EXISTS, "sh"]:
        return _read_if_exists(host, process, argv[4])
    if len(argv) == 5 and argv[1:4] == ["-c", READ_JSON_FILES, "sh"]:
        return _read_json_files(host, process, argv[4])
    if len(argv) == 5 and argv[1:4] == ["-c", WRITABLE, "sh"]:
        return _writable(host, process, argv[4])
    if len(argv) == 5 and argv[1:4] == ["-c", CLAIM, "sh"]:
        return _claim(host, process, argv[4])
    process.stderr.write(f"sh: the simulated host runs no script like {argv[1:3]!r}\n")
    return 2


def _writable(host: SimHost, process: asyncssh.SSHServerProcess[str], name: str) -> int:
    directory = name
    while not host.local(directory).exists():
        directory = posixpath.dirname(directory)
    if host.local(directory).is_dir() and not host.read_only_at(directory):
        return 0
    process.stdout.write(f"{directory}\n")
    return 1


def _claim(host: SimHost, process: asyncssh.SSHServerProcess[str], name: str) -> int:
    path = host.local(name)
    if path.is_dir():
        return CLAIMED_ALREADY
    if host.read_only_at(name):
        process.stderr.write(f"mkdir: cannot create directory '{name}': Read-only file system\n")
        return 1
    try:
        path.mkdir()
    except OSError as exc:
        process.stderr.write(f"mkdir: cannot create directory '{name}': {exc.strerror}\n")
        return 1
    return 0


def _read_if_exists(host: SimHost, process: asyncssh.SSHServerProcess[str], name: str) -> int:
    path = host.local(name)
    if not path.exists():
        return 0
    try:
        process.stdout.write(path.read_text())
    except OSError as exc:
        process.stderr.write(f"cat: {name}: {exc.strerror}\n")
        return 1
    return 0


def _read_json_files(host: SimHost, process: asyncssh.SSHServerProcess[str], name: str) -> int:
    directory = host.local(name)
    if not directory.is_dir():
        return 0
    for path in sorted(directory.glob("*.json")):  # sh's glob skips dot files, as here
        if path.name.startswith(".") or not path.is_file():
            continue
        try:
            text = path.read_text()
        except OSError as exc:
            process.stderr.write(f"sh: 1: cannot open {path.name}: {exc.strerror}\n")
            return 1
        process.stdout.write(f"{path.name}\n{text.replace(chr(10), '')}\n")
    return 0
