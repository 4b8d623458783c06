"""The `specops` command: the TUI, the simulated fleet, and the headless commands.

One module per command, each with `add_parser(sub, common)` and `run(args) -> int`; `COMMANDS`
below is the dispatch table. `common.py` holds what they share (exit codes, output, profile
loading, connecting). Nothing here imports Textual or the simulator when the CLI loads:
`tui.py` imports the app and `demo.py` the simulator only when they run.

- `audit.py`: `specops audit`: the remote commands specops ran, newest last;
- `bench.py`: `specops bench PATH... [--baseline NAME] [--json | --csv]`: read bench results by
  content;
- `compare.py`: `specops compare HOST [A B] [--json] [--offline]`: configurations side by side;
- `flags.py`: `specops flags HOST`: the service's flags, from its effective ExecStart, beside
  last good;
- `group_set.py`: `specops set HOST HOST… NAME=VALUE…`: one change to many hosts, a canary
  then waves;
- `history.py`: `specops history HOST [--json]`: the configurations specops tried on a host,
  newest first;
- `manifest.py`: `specops manifest PACKAGE [--dry-run]`: rewrite MANIFEST.sha256 after hand
  edits;
- `metrics.py`: `specops metrics`: every host's spec-decoding numbers from `/metrics` or
  Prometheus;
- `outcome.py`: how a change ended, as `set`, `rollback`, a group and `watch` print it;
- `report.py`: `specops report PACKAGE [--out FILE]`: the findings report, from the package's
  evidence;
- `rollback.py`: `specops rollback HOST [HOST…] [--to N | --original] [--yes] [--dry-run]`:
  back to a good configuration (several hosts: in waves, as `set`);
- `set.py`: `specops set HOST NAME=VALUE...`: the whole tuning step as one command;
- `snapshot.py`: `specops snapshot HOST...`: collect the evidence into a reproduction package;
- `sweep.py`: `specops sweep HOST NAME=V1,V2...`: a tuning campaign over a grid of flag
  settings;
- `sweep_many.py`: the same grid on several hosts at once, each the whole grid or (`--split`)
  its share;
- `sweep_start.py`: what a campaign needs before it runs: grid, lock, resume, estimate;
- `sweep_output.py`: what `sweep` prints: the plan, a line per cell, the table, `--json`;
- `status.py`: `specops status`: connection, unit state and flags of every host, at once;
- `tail.py`: `specops tail`: one host's journal, filtered like the TUI's view, as text or JSON
  lines;
- `tail_link.py`: what `specops tail` says on stderr while the link stalls or drops (issue 20);
- `terminal.py`: the consoles `out` and `err` print with: no control character from a host or
  a file reaches the terminal;
- `trust.py`: `specops trust HOST`: enrol a host's key, fingerprint shown first; never a
  changed one;
- `verify.py`: `specops verify PACKAGE`: re-hash a package against its MANIFEST.sha256; list
  what differs;
- `watch.py`: `specops watch HOST... [--json]`: headless monitoring, and the probation
  rollback;

Who may import this package: `console/__main__.py` and the console script; nothing in the core.
Exit status (contract): 0 success; 1 the action failed; 2 bad usage or bad profile;
3 host unreachable or host key refused. `--json` prints one JSON object per line.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from types import ModuleType

from console.cli import (
    audit,
    bench,
    compare,
    demo,
    flags,
    history,
    manifest,
    metrics,
    report,
    rollback,
    snapshot,
    status,
    sweep,
    tail,
    trust,
    verify,
    watch,
)
from console.cli import set as set_
from console.cli.common import EXIT_OK, EXIT_USAGE, UsageError, err, load_profiles
from console.cli.tui import add_follow_option, run_tui
from console.hosts.profiles import ProfileError

COMMANDS: dict[str, ModuleType] = {
    "demo": demo,
    "status": status,
    "snapshot": snapshot,
    "verify": verify,
    "manifest": manifest,
    "bench": bench,
    "report": report,
    "compare": compare,
    "trust": trust,
    "flags": flags,
    "set": set_,
    "rollback": rollback,
    "sweep": sweep,
    "history": history,
    "audit": audit,
    "tail": tail,
    "metrics": metrics,
    "watch": watch,
}
"""Command name → its module (`add_parser`, `run`), in the order `--help` lists them."""


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--profiles",
        metavar="DIR",
        default=argparse.SUPPRESS,
        help="directory of host profiles (default: ./profiles, then ~/.config/specops/profiles)",
    )
    common.add_argument(
        "--inventory",
        metavar="FILE",
        default=argparse.SUPPRESS,
        help="hosts from an Ansible inventory (or its saved `ansible-inventory --list` JSON); "
        "--profiles then holds the templates all.toml, GROUP.toml, HOST.toml",
    )
    common.add_argument(
        "--group",
        metavar="NAME",
        action="append",
        default=argparse.SUPPRESS,
        help="only the hosts in this group (an inventory group, or a profile's `groups`); "
        "repeat for several",
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
    add_follow_option(parser)  # the TUI's own; the headless commands connect to what they name
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in COMMANDS.values():
        module.add_parser(sub, common)
    return parser


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        # argparse fills a `*` positional only before the first option: a command may take
        # the words it left over (`sweep HOST --yes budget=4,8`) with its `take_unknown`.
        taker = getattr(COMMANDS.get(getattr(args, "command", None) or ""), "take_unknown", None)
        if taker is None or not taker(args, unknown):
            parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    args.profiles = getattr(args, "profiles", None)
    args.read_only = getattr(args, "read_only", False)
    args.inventory = getattr(args, "inventory", None)
    args.group = getattr(args, "group", None)
    args.follow = getattr(args, "follow", None)
    return args


def _console(args: argparse.Namespace) -> int:
    profiles = load_profiles(args)
    notes = [f"skipped: {host.reason}" for host in args.unusable]  # said again on screen
    return run_tui(profiles, read_only=args.read_only, follow=args.follow, notes=notes)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    command: Callable[[argparse.Namespace], int] = (
        COMMANDS[args.command].run if args.command else _console
    )
    try:
        return command(args)
    except (ProfileError, UsageError) as exc:
        err.print(f"specops: {exc}", markup=False, soft_wrap=True)  # paths stay whole
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return _reader_went_away()


def _reader_went_away() -> int:
    """`specops audit --json | head -3`: the reader has what it wanted; that is success.

    stdout is pointed at /dev/null so the interpreter's final flush cannot raise again.
    """
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return EXIT_OK
