"""`specops trust HOST`: enrol a host's key, fingerprint shown first; never a changed one."""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

import asyncssh

from console.cli.common import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
    err,
    load_profiles,
    out,
)
from console.profiles import select
from console.transport.ssh import fetch_host_key, host_key_line, known_hosts_path


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    trust = sub.add_parser("trust", parents=[common], help="enrol a host's key (shown first)")
    trust.add_argument("host", metavar="HOST")
    trust.add_argument("--yes", action="store_true", help="do not ask")


def run(args: argparse.Namespace) -> int:
    return asyncio.run(cmd_trust(args))


async def cmd_trust(args: argparse.Namespace) -> int:
    (profile,) = select(load_profiles(args), [args.host])
    try:
        key = await fetch_host_key(profile)
    except (OSError, asyncssh.Error, TimeoutError) as exc:
        err.print(f"{profile.name}: cannot reach {profile.ssh.host}: {exc}")
        return EXIT_UNREACHABLE
    if key is None:
        err.print(f"{profile.name}: the host offered no key")
        return EXIT_UNREACHABLE
    fingerprint = key.get_fingerprint("sha256")
    path = known_hosts_path(profile)
    port = profile.ssh_port
    if path.exists():
        trusted = asyncssh.read_known_hosts(str(path)).match(profile.ssh.host, "", port)[0]
        pinned = {k.public_data for k in trusted}
        if key.public_data in pinned:
            out.print(f"{profile.name}: {fingerprint} is already trusted in {path}")
            return EXIT_OK
        if pinned:
            err.print(
                f"{profile.name}: the host key CHANGED: now {fingerprint}, but {path} pins "
                "another key. If the host was reinstalled, remove its old entry by hand first."
            )
            return EXIT_FAILED
    out.print(f"{profile.name} ({profile.ssh.host}:{port}) offers {key.get_algorithm()} key")
    out.print(f"  {fingerprint}")
    if not args.yes:
        if not sys.stdin.isatty():
            err.print("refusing to trust without a terminal to ask on; pass --yes to confirm")
            return EXIT_USAGE
        prompt = f"Trust this key and add it to {path}? [y/N] "
        answer = (await asyncio.to_thread(input, prompt)).strip().lower()
        if answer not in ("y", "yes"):
            err.print("not trusted")
            return EXIT_FAILED
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    with path.open("a", encoding="utf-8") as fh:
        fh.write(host_key_line(profile.ssh.host, port, key))
    out.print(f"{profile.name}: trusted {fingerprint} ({path})")
    return EXIT_OK
