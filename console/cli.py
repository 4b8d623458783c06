"""The `specops` command: the TUI, the simulated fleet, and the headless commands.

Exit status (contract): 0 success; 1 the action failed; 2 bad usage or bad profile;
3 host unreachable or host key refused. `--json` prints one JSON object per line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import asyncssh
from rich.console import Console
from rich.table import Table

from console.audit import AuditLog
from console.events import ServiceStatus
from console.fleet import read_status
from console.profiles import Profile, ProfileError, load_fleet, select
from console.settings import config_dir, load_settings
from console.sim.fleet import SimFleet, ThreadedSimFleet
from console.sim.sglang import Timing
from console.ssh import (
    ConnState,
    HostSession,
    HostState,
    RemoteError,
    fetch_host_key,
    host_key_line,
    known_hosts_path,
)

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_UNREACHABLE = 0, 1, 2, 3

err = Console(stderr=True, highlight=False)
out = Console(highlight=False)


class UsageError(Exception):
    """Bad input from the user: printed and exit 2."""


def default_profiles_dir() -> Path:
    local = Path("profiles")
    if local.is_dir() and any(local.glob("*.toml")):
        return local
    configured = load_settings().profiles_dir
    return configured.expanduser() if configured else config_dir() / "profiles"


def _load(args: argparse.Namespace) -> list[Profile]:
    directory = Path(args.profiles) if args.profiles else default_profiles_dir()
    return load_fleet(directory)


# --- status ------------------------------------------------------------------------------


def new_session(profile: Profile) -> HostSession:
    """A session whose every remote command goes to the audit log."""
    return HostSession(profile, on_command=AuditLog().record)


async def _status_one(profile: Profile) -> tuple[HostState, ServiceStatus | None, str | None]:
    session = new_session(profile)
    session.start()
    try:
        state = await session.wait_settled(profile.ssh.connect_timeout_s + 5)
        if state.state is not ConnState.CONNECTED:
            return state, None, None
        try:
            return state, await read_status(session), None
        except (RemoteError, ValueError) as exc:
            return state, None, str(exc)
    finally:
        await session.close()


def _status_record(
    profile: Profile, state: HostState, status: ServiceStatus | None, error: str | None
) -> dict[str, Any]:
    record: dict[str, Any] = {
        "host": profile.name,
        "connection": state.state.value,
        "connected": state.state is ConnState.CONNECTED,
        "unit": profile.service.unit,
    }
    if state.detail:
        record["detail"] = state.detail
    if state.fingerprint:
        record["fingerprint"] = state.fingerprint
    if status is not None:
        record.update(
            active_state=status.active_state,
            sub_state=status.sub_state,
            invocation_id=status.invocation_id,
            n_restarts=status.n_restarts,
            need_daemon_reload=status.need_daemon_reload,
            flags=status.flags,
        )
    if error:
        record["error"] = error
    return record


async def cmd_status(args: argparse.Namespace) -> int:
    profiles = select(_load(args), args.hosts)
    results = await asyncio.gather(*(_status_one(p) for p in profiles))
    records = [_status_record(p, *r) for p, r in zip(profiles, results, strict=True)]
    if args.json:
        for record in records:
            print(json.dumps(record), flush=True)
    else:
        table = Table("host", "connection", "unit state", "invocation", "flags")
        for r in records:
            conn = r["connection"]
            if r.get("fingerprint"):
                conn += f"\n{r['fingerprint']}"
            elif r.get("detail"):
                conn += f"\n{r['detail']}"
            state = f"{r['active_state']}/{r['sub_state']}" if "active_state" in r else "-"
            flags = " ".join(f"{k}={v}" for k, v in r.get("flags", {}).items())
            table.add_row(r["host"], conn, state, r.get("invocation_id", "-")[:12], flags or "-")
        out.print(table)
    failed = any(not r["connected"] for r in records)
    return (
        EXIT_UNREACHABLE if failed else (EXIT_FAILED if any("error" in r for r in records) else 0)
    )


# --- trust -------------------------------------------------------------------------------


async def cmd_trust(args: argparse.Namespace) -> int:
    (profile,) = select(_load(args), [args.host])
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


# --- demo --------------------------------------------------------------------------------


async def serve_demo(directory: Path, hosts: int, timing: Timing) -> int:
    fleet = SimFleet(directory, hosts=hosts, timing=timing)
    await fleet.start()
    out.print(f"simulated fleet of {hosts} host(s) running; profiles in {fleet.profiles_dir}")
    for name, host in fleet.hosts.items():
        out.print(f"  {name}: ssh root@127.0.0.1 -p {host.port}")
    out.print(f"try: specops status --profiles {fleet.profiles_dir}")
    print(f"READY {fleet.profiles_dir}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await fleet.stop()
    return EXIT_OK


def run_demo(args: argparse.Namespace) -> int:
    timing = Timing(load_s=args.load_delay, decode_interval_s=args.decode_interval)
    if args.serve:
        return asyncio.run(serve_demo(Path(args.serve), args.hosts, timing))
    require_terminal()
    with tempfile.TemporaryDirectory(prefix="specops-demo-") as tmp:
        sim = ThreadedSimFleet(SimFleet(Path(tmp), hosts=args.hosts, timing=timing))
        profiles = sim.start()
        try:
            return run_tui(profiles, read_only=args.read_only)
        finally:
            sim.stop()


def require_terminal() -> None:
    """The TUI reads keys from a terminal; without one it would spin on EOF forever."""
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise UsageError(
            "the TUI needs a terminal on stdin and stdout; "
            "for scripts use `specops status`, `tail`, `flags`, `set` or `snapshot`"
        )


def run_tui(profiles: list[Profile], *, read_only: bool) -> int:
    require_terminal()
    from console.app import SpecopsApp  # the only place the CLI reaches for Textual
    from console.fleet import Fleet

    settings = load_settings()
    fleet = Fleet(profiles, on_command=AuditLog().record)
    app = SpecopsApp(fleet, read_only=read_only, settings=settings)
    app.run()
    return app.return_code or 0


# --- wiring ------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--profiles",
        metavar="DIR",
        default=argparse.SUPPRESS,
        help="directory of host profiles (default: ./profiles, then ~/.config/specops/profiles)",
    )
    common.add_argument(
        "--read-only",
        action="store_true",
        default=argparse.SUPPRESS,
        help="refuse every action that changes a host",
    )
    parser = argparse.ArgumentParser(
        prog="specops",
        parents=[common],
        description="Operations console for SGLang speculative-decoding GPU hosts.",
        epilog="Exit status: 0 ok, 1 action failed, 2 bad usage or profile, 3 host unreachable.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    demo = sub.add_parser("demo", parents=[common], help="the TUI over a simulated GPU fleet")
    demo.add_argument("--hosts", type=int, default=2, help="number of simulated hosts (1-64)")
    demo.add_argument("--serve", metavar="DIR", help="run the fleet headless; files go to DIR")
    demo.add_argument("--load-delay", type=float, default=4.0, help=argparse.SUPPRESS)
    demo.add_argument("--decode-interval", type=float, default=1.0, help=argparse.SUPPRESS)

    status = sub.add_parser("status", parents=[common], help="connection, unit state, flags")
    status.add_argument("hosts", nargs="*", metavar="HOST")
    status.add_argument("--json", action="store_true", help="one JSON object per host")

    from console import cli_snapshot  # imports this module: loaded once this one is complete

    cli_snapshot.add_parsers(sub, common)

    trust = sub.add_parser("trust", parents=[common], help="enrol a host's key (shown first)")
    trust.add_argument("host", metavar="HOST")
    trust.add_argument("--yes", action="store_true", help="do not ask")

    from console import cli_flags  # imports this module: loaded once this one is complete

    cli_flags.add_parsers(sub, common)

    from console import cli_tail  # imports this module: loaded once this one is complete

    cli_tail.add_parsers(sub, common)
    return parser


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    args = build_parser().parse_args(argv)
    args.profiles = getattr(args, "profiles", None)
    args.read_only = getattr(args, "read_only", False)
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        if args.command == "demo":
            if not 1 <= args.hosts <= 64:
                raise UsageError(f"--hosts {args.hosts}: must be between 1 and 64")
            return run_demo(args)
        if args.command in ("snapshot", "verify"):
            from console import cli_snapshot

            return cli_snapshot.run(args)
        if args.command == "status":
            return asyncio.run(cmd_status(args))
        if args.command == "trust":
            return asyncio.run(cmd_trust(args))
        if args.command == "tail":
            from console import cli_tail

            return cli_tail.run(args)
        from console import cli_flags

        if args.command in cli_flags.COMMANDS:
            return cli_flags.run(args)
        return run_tui(_load(args), read_only=args.read_only)
    except (ProfileError, UsageError) as exc:
        err.print(f"specops: {exc}", markup=False)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130
