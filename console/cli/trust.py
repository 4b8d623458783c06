"""`specops trust HOST`: enrol a host's key, fingerprint shown first; never a changed one."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

import asyncssh

from console.cli.common import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
    err,
    human_to_stderr,
    load_profiles,
    out,
)
from console.hosts.profiles import select
from console.transport.ssh import (
    fetch_host_key,
    host_key_identity,
    host_key_line,
    known_hosts_path,
    pinned_keys,
)


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    trust = sub.add_parser("trust", parents=[common], help="enrol a host's key (shown first)")
    trust.add_argument("host", metavar="HOST")
    trust.add_argument("--yes", action="store_true", help="do not ask")
    trust.add_argument("--json", action="store_true", help="one JSON object: key and outcome")


def run(args: argparse.Namespace) -> int:
    return asyncio.run(cmd_trust(args))


async def cmd_trust(args: argparse.Namespace) -> int:
    as_json: bool = getattr(args, "json", False)
    with human_to_stderr(as_json):
        code, record = await _trust(args)
    if as_json:
        print(json.dumps(record), flush=True)
    return code


async def _trust(args: argparse.Namespace) -> tuple[int, dict[str, Any]]:
    """The exit code, and the JSON record (`outcome`: trusted, already_trusted, changed,
    unreachable, no_key, not_trusted, no_terminal)."""
    (profile,) = select(load_profiles(args), [args.host])
    record: dict[str, Any] = {"host": profile.name}
    try:
        key = await fetch_host_key(profile)
    except (OSError, asyncssh.Error, TimeoutError) as exc:
        err.print(f"{profile.name}: cannot reach {profile.ssh.host}: {exc}")
        return EXIT_UNREACHABLE, {**record, "outcome": "unreachable", "error": str(exc)}
    if key is None:
        err.print(f"{profile.name}: the host offered no key")
        return EXIT_UNREACHABLE, {**record, "outcome": "no_key"}
    fingerprint = key.get_fingerprint("sha256")
    path = known_hosts_path(profile)
    # What the connection will look up (an ssh_config alias resolved, its Port), not the alias.
    name, port = host_key_identity(profile)
    record.update(
        fingerprint=fingerprint,
        algorithm=key.get_algorithm(),
        known_hosts=str(path),
        address=f"{name}:{port}",
    )
    pinned = {k.public_data: k for k in pinned_keys(profile)}
    if key.public_data in pinned:
        out.print(f"{profile.name}: {fingerprint} is already trusted in {path}")
        return EXIT_OK, {**record, "outcome": "already_trusted"}
    if pinned:
        shown = [k.get_fingerprint("sha256") for k in pinned.values()]
        err.print(
            f"{profile.name}: the host key CHANGED: the host offers {fingerprint}, but {path} "
            f"pins {', '.join(shown)}. If the host was reinstalled, remove its old entry by "
            "hand first."
        )
        # As every command says of a host whose key is refused.
        return EXIT_UNREACHABLE, {**record, "outcome": "changed", "pinned": shown}
    out.print(f"{profile.name} ({name}:{port}) offers {key.get_algorithm()} key")
    out.print(f"  {fingerprint}")
    if not args.yes:
        if not sys.stdin.isatty():
            err.print("refusing to trust without a terminal to ask on; pass --yes to confirm")
            return EXIT_USAGE, {**record, "outcome": "no_terminal"}
        prompt = f"Trust this key and add it to {path}? [y/N] "
        answer = (await asyncio.to_thread(input, prompt)).strip().lower()
        if answer not in ("y", "yes"):
            err.print("not trusted")
            return EXIT_FAILED, {**record, "outcome": "not_trusted"}
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    with path.open("a", encoding="utf-8") as fh:
        fh.write(host_key_line(name, port, key))
    out.print(f"{profile.name}: trusted {fingerprint} ({path})")
    return EXIT_OK, {**record, "outcome": "trusted"}
