"""What every `specops` command shares: exit codes, output, profile loading, connecting.

Exit status (contract): 0 success; 1 the action failed; 2 bad usage or bad profile;
3 host unreachable or host key refused. `--json` prints one JSON object per line.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
import weakref
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

from console.cli.terminal import SafeConsole
from console.hosts.inventory import load_inventory_fleet
from console.hosts.profiles import Profile, ProfileError, Unusable, load_fleet
from console.local.audit import AuditLog
from console.local.settings import config_dir, load_settings, settings_path
from console.transport.ssh import (
    ConnectBudget,
    ConnState,
    HostSession,
    HostState,
    check_identity,
)

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_UNREACHABLE = 0, 1, 2, 3

err = SafeConsole(stderr=True, highlight=False, soft_wrap=True)
"""Messages on stderr are never wrapped: a path or a command in one stays whole to copy."""
out = SafeConsole(highlight=False)
"""Both print no control character they were given (console/cli/terminal.py)."""


class UsageError(Exception):
    """Bad input from the user: printed and exit 2."""


def default_profiles_dir() -> Path:
    local = Path("profiles")
    if local.is_dir() and any(local.glob("*.toml")):
        return local
    configured = load_settings().profiles_dir
    return configured.expanduser() if configured else config_dir() / "profiles"


def load_profiles(args: argparse.Namespace) -> list[Profile]:
    directory = Path(args.profiles) if args.profiles else default_profiles_dir()
    inventory = getattr(args, "inventory", None) or load_settings().inventory
    unusable: list[Unusable] = []
    if inventory:
        notices: list[str] = []
        profiles = load_inventory_fleet(
            Path(inventory).expanduser(), directory, notices, unusable, check_identity
        )
        for notice in notices:
            err.print(f"specops: {notice}", style="yellow", markup=False)
    else:
        profiles = load_fleet(directory)
        for profile in profiles:
            check_identity(profile)
    groups = getattr(args, "group", None)
    if groups:
        unusable = [u for u in unusable if set(u.groups) & set(groups)]
    named = set(getattr(args, "hosts", None) or ()) | {getattr(args, "host", None)}
    for host in unusable:
        if host.name in named:  # asked for by name: nothing to do without it
            raise ProfileError(f"{host.name} cannot be used: {host.reason}")
    if not named - {None}:
        for host in unusable:  # one line each, and the rest of the fleet goes on
            err.print(f"specops: skipped: {host.reason}", style="yellow", markup=False)
    args.unusable = unusable
    return in_groups(profiles, groups) if groups else profiles


def in_groups(profiles: list[Profile], groups: list[str]) -> list[Profile]:
    """The hosts in any of `groups`; a group no host is in is a usage error naming them."""
    known = {g for p in profiles for g in p.groups}
    unknown = [g for g in groups if g not in known]
    if unknown:
        raise UsageError(
            f"no host is in group {', '.join(map(repr, unknown))}; "
            f"groups: {', '.join(sorted(known)) or 'none (profiles name no groups)'}"
        )
    return [p for p in profiles if set(p.groups) & set(groups)]


def new_session(
    profile: Profile, on_state: Callable[[HostState], None] | None = None
) -> HostSession:
    """A session whose every remote command goes to the audit log, connecting under the
    command's connect budget (`connect_budget` in settings.toml, shared by every session
    the command opens: `status` over 200 inventory hosts makes at most that many key
    exchanges at once)."""
    audit = AuditLog(secrets=profile.secret_names).record
    return HostSession(profile, on_state=on_state, on_command=audit, budget=connect_budget())


_BUDGETS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, ConnectBudget] = (
    weakref.WeakKeyDictionary()
)


def connect_budget() -> ConnectBudget | None:
    """The running command's connect budget: one per event loop (a command is one
    `asyncio.run`), since its semaphore belongs to the loop it first waits in. None outside
    a loop, where nothing connects."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return None
    budget = _BUDGETS.get(loop)
    if budget is None:
        budget = _BUDGETS[loop] = ConnectBudget(load_settings().connect_budget)
    return budget


async def connect(profile: Profile) -> HostSession | None:
    session = new_session(profile)
    session.start()
    state = await session.wait_settled(profile.ssh.connect_timeout_s + 5)
    if state.state is ConnState.CONNECTED:
        return session
    if state.detail.startswith("CHANGED"):
        detail = f": host key {state.detail}; refused"
    elif state.fingerprint:
        detail = f" ({state.fingerprint})"
    else:
        detail = f": {state.detail}"
    err.print(f"{profile.name}: {state.state.value}{detail}", markup=False)
    await session.close()
    return None


def read_only_reason(args: argparse.Namespace) -> str | None:
    """Which source makes this run read-only, or None: the flag, the environment, the file.

    The one check every changing command makes, so no source can be forgotten by one of them.
    """
    if getattr(args, "read_only", False):
        return "--read-only"
    if load_settings().read_only:
        if os.environ.get("SPECOPS_READ_ONLY") is not None:
            return f"SPECOPS_READ_ONLY={os.environ['SPECOPS_READ_ONLY']}"
        return f"read_only = true in {settings_path()}"
    return None


def refuse_read_only(args: argparse.Namespace, host: str) -> bool:
    """True (and says why) when a changing command must not run: read-only, and not a
    `--dry-run`."""
    reason = read_only_reason(args)
    if reason is None or getattr(args, "dry_run", False):
        return False
    err.print(
        f"specops: refusing to change {host}: {reason} (try --dry-run)",
        markup=False,
        soft_wrap=True,
    )
    return True


async def confirm(args: argparse.Namespace, prompt: str, declined: str) -> int | None:
    """None to go on (`--yes`, or `y` at the prompt); else the exit status: 2 without a
    terminal to ask on, 1 when the operator said no."""
    if args.yes:
        return None
    if not sys.stdin.isatty():
        err.print("refusing to restart without a terminal to ask on; pass --yes to confirm")
        return EXIT_USAGE
    answer = (await asyncio.to_thread(input, prompt)).strip().lower()
    if answer not in ("y", "yes"):
        err.print(declined)
        return EXIT_FAILED
    return None


def require_terminal() -> None:
    """The TUI reads keys from a terminal; without one it would spin on EOF forever."""
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise UsageError(
            "the TUI needs a terminal on stdin and stdout; "
            "for scripts use `specops status`, `tail`, `flags`, `set` or `snapshot`"
        )


@contextlib.contextmanager
def human_to_stderr(enabled: bool = True) -> Iterator[None]:
    """With `--json`, stdout holds only JSON lines: what is printed for people goes to
    stderr meanwhile."""
    if not enabled or out.stderr:
        yield
        return
    # `stderr`, not `file`: setting `file` would pin the stream of the moment (a test's
    # captured one) past its life; `stderr` follows whatever sys.stderr is when printing.
    out.stderr = True
    try:
        yield
    finally:
        out.stderr = False


def iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="seconds")
