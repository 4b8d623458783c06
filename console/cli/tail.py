"""`specops tail`: one host's journal, filtered like the TUI's view, as text or JSON lines.

The same follower as the TUI (gapless across reconnects, tracebacks kept with their record)
and the same client-side filter: by default the profile's `[journal] patterns`, `--grep`
instead of them, `--all` for everything. Crash records, restart markers and rate-limit gaps
always pass. `--json` prints one object per record with its cursor, timestamp, message,
continuation lines, crash signature and parsed SGLang fields, so scripts never re-parse text.
While the link stalls or drops, console/cli/tail_link.py says so on stderr, never on stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import os
import signal
import sys
from collections.abc import Coroutine, Mapping
from typing import Any, TextIO

from console.cli.common import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_UNREACHABLE,
    UsageError,
    err,
    load_profiles,
    new_session,
)
from console.cli.tail_link import PROBE_TIMEOUT_S, STALL_S, LinkNotices
from console.hosts import tasks
from console.hosts.events import JournalEntry
from console.hosts.profiles import Profile, select
from console.transport import remote
from console.transport.ssh import ConnState, Disconnected, RemoteError
from console.watch.journal import JournalFollower, LineFilter, assemble, decode_lines
from console.watch.sglang import (
    DecodeBatch,
    DraftRunnerInit,
    GraphCapture,
    Header,
    KVCacheAllocated,
    ParsedLine,
    PrefillBatch,
    ServerArgsLine,
    ServerReady,
    WeightLoad,
    parse_line,
)
from console.watch.signatures import CustomMetrics

DEFAULT_LINES = 10

KINDS: dict[type, str] = {
    DecodeBatch: "decode",
    PrefillBatch: "prefill",
    WeightLoad: "weight_load",
    KVCacheAllocated: "kv_cache",
    GraphCapture: "graph_capture",
    ServerReady: "ready",
    ServerArgsLine: "server_args",
    DraftRunnerInit: "draft_init",
}

_RED, _RESET = "\x1b[31m", "\x1b[0m"


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    tail = sub.add_parser(
        "tail",
        parents=[common],
        help="a host's journal, filtered by its profile's patterns",
        description=(
            "Follow the service journal of HOST. Shows the records matching the profile's "
            "[journal] patterns (or --grep); crashes, restarts and gaps always show."
        ),
    )
    tail.add_argument("host", metavar="HOST")
    tail.add_argument(
        "--grep",
        metavar="RE",
        action="append",
        default=[],
        help="show records matching RE (Python regex; repeatable) instead of the profile's",
    )
    tail.add_argument("--all", action="store_true", help="show every record, no filter")
    tail.add_argument(
        "-n",
        "--lines",
        type=int,
        default=DEFAULT_LINES,
        metavar="N",
        help=f"start N journal entries back (default {DEFAULT_LINES}); the filter applies after",
    )
    tail.add_argument("--no-follow", action="store_true", help="print and exit")
    tail.add_argument("--json", action="store_true", help="one JSON object per record")


def line_filter(profile: Profile, greps: list[str], show_all: bool) -> LineFilter:
    """The filter the options ask for; a bad `--grep` is a usage error naming it."""
    if show_all and greps:
        raise UsageError("--all and --grep exclude each other")
    if show_all:
        return LineFilter()
    try:
        return LineFilter(greps or profile.journal.patterns)
    except ValueError as exc:
        raise UsageError(f"--grep {exc}") from None


def run(args: argparse.Namespace) -> int:
    (profile,) = select(load_profiles(args), [args.host])
    if args.lines < 0:
        raise UsageError(f"-n {args.lines}: must be 0 or more")
    chosen = line_filter(profile, args.grep, args.all)
    printer = Printer(profile, chosen, as_json=args.json, stream=sys.stdout)
    return asyncio.run(tail(profile, printer, lines=args.lines, follow=not args.no_follow))


async def tail(
    profile: Profile,
    printer: Printer,
    *,
    lines: int,
    follow: bool,
    stall_s: float = STALL_S,
    probe_timeout_s: float = PROBE_TIMEOUT_S,
) -> int:
    notices = LinkNotices(
        profile.name,
        profile.service.unit,
        lambda text: err.print(text, markup=False, soft_wrap=True),
        stall_s=stall_s,
        probe_timeout_s=probe_timeout_s,
    )
    session = new_session(profile, on_state=notices.on_state)
    session.start()
    try:
        state = await session.wait_settled(profile.ssh.connect_timeout_s + 5)
        if state.state is not ConnState.CONNECTED:
            why = state.fingerprint or state.detail
            err.print(f"{profile.name}: {state.state.value}" + (f": {why}" if why else ""))
            return EXIT_UNREACHABLE
        unit = profile.service.unit
        try:
            if not follow:
                result = await session.run(remote.journal_read(unit, lines=lines), timeout=120)
                printer(assemble(decode_lines(profile.name, result.stdout.splitlines())))
                return EXIT_OK

            def deliver(records: list[JournalEntry]) -> None:
                notices.data()
                printer(records)

            follower = JournalFollower(session, unit, deliver, history=lines)
            return await _until_interrupted(_with(notices.watch(session), follower.run()))
        except Disconnected as exc:  # the link went (exit 3, as for every command)
            err.print(f"{exc}", markup=False)
            return EXIT_UNREACHABLE
        except RemoteError as exc:
            err.print(f"{exc}", markup=False)
            return EXIT_FAILED
        except BrokenPipeError:  # `specops tail ... | head`: the reader has all it wanted
            with contextlib.suppress(OSError):
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return EXIT_OK
    finally:
        await session.close()


async def _with(beside: Coroutine[Any, Any, None], main: Coroutine[Any, Any, None]) -> None:
    """Run `main`, with `beside` running next to it until `main` ends."""
    helper = asyncio.ensure_future(beside)
    try:
        await main
    finally:
        await tasks.stop(helper)


async def _until_interrupted(following: Any) -> int:
    """Run the follower until Ctrl-C or SIGTERM (a normal end: exit 0)."""
    task: asyncio.Task[None] = asyncio.ensure_future(following)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, task.cancel)
    try:
        await task
    except asyncio.CancelledError:
        return EXIT_OK
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
    return EXIT_OK


class Printer:
    """Writes delivered records, one write and one flush per batch."""

    def __init__(
        self, profile: Profile, line_filter: LineFilter, *, as_json: bool, stream: TextIO
    ) -> None:
        self.filter = line_filter
        self.as_json = as_json
        self.stream = stream
        self.custom = CustomMetrics(profile.metrics)
        self.colour = not as_json and stream.isatty()

    def __call__(self, records: list[JournalEntry]) -> None:
        chunks: list[str] = []
        for record in records:
            if self.as_json:
                if self.filter.accepts(record) or record.new_invocation:
                    chunks.append(json.dumps(record_json(record, self.custom)))
                continue
            lines = self.filter.visible(record)
            if lines and self.colour and record.crash is not None:
                lines = [f"{_RED}{line}{_RESET}" for line in lines]
            chunks.extend(lines)
        if chunks:
            self.stream.write("\n".join(chunks) + "\n")
            self.stream.flush()


def record_json(record: JournalEntry, custom: CustomMetrics | None = None) -> dict[str, Any]:
    """One record for `--json`: where it is, what it says, and what it means."""
    parsed = None if record.dropped else parse_line(record.text)
    return {
        "host": record.host,
        "cursor": record.cursor,
        "timestamp": record.timestamp,
        "message": record.message,
        "continuation": list(record.continuation),
        "priority": record.priority,
        "invocation": record.invocation,
        "pid": record.pid,
        "new_invocation": record.new_invocation,
        "dropped": record.dropped,
        "crash": record.crash,
        "parsed": None if parsed is None else parsed_fields(parsed),
        "metrics": dict(custom.match(record.message)) if custom is not None else {},
    }


def parsed_fields(parsed: ParsedLine) -> dict[str, Any]:
    """A parsed SGLang line as plain JSON values, with its `kind`."""
    data: dict[str, Any] = {"kind": KINDS[type(parsed)]}
    for f in dataclasses.fields(parsed):
        value = getattr(parsed, f.name)
        if isinstance(value, Header):
            value = {"timestamp": value.timestamp, "ranks": dict(value.ranks)}
        elif f.name == "fields" or isinstance(value, Mapping):
            value = dict(value)
        elif isinstance(value, tuple):
            value = list(value)
        data[f.name] = value
    return data
