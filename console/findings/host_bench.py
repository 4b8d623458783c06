"""The selected host's bench files as they are on the host now, read over SFTP into memory.

The same files a snapshot would fetch (the profile's `[artifacts] bench` globs, each match
checked on its own: console/package/bench_globs.py), parsed by content
(console/findings/bench.py); a file that names no configuration gets the one the host's
experiment ledger says ran at the file's mtime. Nothing is written anywhere: this is for
looking, the snapshot is for keeping.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import asyncssh

from console.findings.bench import BenchFile, parse_bench
from console.findings.bench_files import with_ledger_config
from console.ledger.ledger import load_from_host
from console.package.bench_globs import bench_files
from console.package.names import shown
from console.package.transfer import read_file
from console.transport.ssh import Disconnected, HostSession, RemoteError


@dataclass
class HostBench:
    files: list[BenchFile] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


async def read_host_bench(session: HostSession) -> HostBench:
    """Every bench file the profile's globs match on the host, parsed; notes and errors name
    the files that were skipped and why."""
    found = HostBench()
    try:
        experiments = await load_from_host(session)
    except RemoteError as exc:
        experiments = []
        found.notes.append(f"the experiment ledger could not be read: {exc}")
    async with session.sftp() as sftp:
        for item in await bench_files(session, sftp, session.profile.artifacts, found):
            try:
                source = item.source.encode("utf-8", "surrogateescape")
                data = await read_file(sftp, source)
            except asyncssh.SFTPError as exc:
                found.notes.append(f"{shown(item.source)}: skipped: {exc.reason}")
                continue
            except (OSError, asyncssh.Error) as exc:
                raise Disconnected(session.name, f"reading {shown(item.source)}: {exc}") from exc
            bench = parse_bench(item.source, data)
            if not bench.config:
                bench = with_ledger_config(bench, session.name, experiments, item.mtime) or bench
            found.files.append(bench)
    return found
