"""`specops tail` through a stalled and a dropped link (issue 20: "tail shows nothing while a
partition stalls it"): stderr says what the link is doing, stdout stays a clean stream of
JSON records with none lost or repeated."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from console.cli.tail import Printer, tail
from console.hosts.profiles import Profile
from console.sim.fleet import SimFleet
from console.transport import remote
from console.transport.ssh import HostSession
from console.watch.journal import LineFilter, decode_lines
from tests import pace

Fault = Callable[[], Awaitable[None]]


async def until(
    capsys: pytest.CaptureFixture[str], seen: list[str], want: str, timeout: float = 20.0
) -> None:
    """Collect stdout/stderr into `seen` ([out, err]) until `want` is in stderr."""
    deadline = pace.deadline(timeout)
    while want not in seen[1]:
        captured = capsys.readouterr()
        seen[0] += captured.out
        seen[1] += captured.err
        assert time.monotonic() < deadline, f"no {want!r} on stderr: {seen[1]!r}"
        await asyncio.sleep(0.1)


def slow_keepalives(profile: Profile) -> Profile:
    """Keepalives that would take a minute to notice: only the tail's own probe can."""
    ssh = profile.ssh.model_copy(update={"keepalive_interval_s": 30.0})
    return profile.model_copy(update={"ssh": ssh})


async def follow_through(
    profile: Profile,
    capsys: pytest.CaptureFixture[str],
    fault: Fault,
    mend: Fault,
    lost: str,
    then: str | None = None,
    *,
    stall_s: float = 1.0,
    timeout: float = 20.0,
) -> tuple[list[str], str]:
    """Tail `profile` as JSON; apply `fault` until stderr says `lost` (and `then`), then
    `mend`; the stdout lines and the stderr text."""
    printer = Printer(profile, LineFilter(), as_json=True, stream=sys.stdout)
    task = asyncio.ensure_future(
        tail(profile, printer, lines=0, follow=True, stall_s=stall_s, probe_timeout_s=stall_s)
    )
    seen = ["", ""]
    try:
        deadline = pace.deadline(timeout)
        while seen[0].count("\n") < 5:  # following, with decode lines arriving
            seen[0] += capsys.readouterr().out
            assert time.monotonic() < deadline and not task.done()
            await asyncio.sleep(0.1)
        await fault()
        await until(capsys, seen, lost, timeout)
        if then is not None:
            await until(capsys, seen, then, timeout)
        await mend()
        await until(capsys, seen, "reconnected after", timeout)
        before = seen[0].count("\n")
        deadline = pace.deadline(timeout)
        while seen[0].count("\n") < before + 10:  # records flow again
            seen[0] += capsys.readouterr().out
            assert time.monotonic() < deadline
            await asyncio.sleep(0.1)
    finally:
        task.cancel()  # what Ctrl-C does: a normal end of a follow
        with contextlib.suppress(asyncio.CancelledError):
            await task
    captured = capsys.readouterr()
    return (seen[0] + captured.out).splitlines(), seen[1] + captured.err


async def journal_cursors(profile: Profile) -> list[str]:
    session = HostSession(profile)
    session.start()
    try:
        assert await session.wait_connected(10)
        unit = profile.service.unit
        result = await session.run(remote.journal_read(unit, lines=100_000), timeout=60)
    finally:
        await session.close()
    return [e.cursor for e in decode_lines(profile.name, result.stdout.splitlines())]


def assert_gapless(lines: list[str], journal: list[str]) -> None:
    """Every stdout line is a record, and the records are the journal's, in order, each once."""
    cursors = [json.loads(line)["cursor"] for line in lines]
    first = journal.index(cursors[0])
    assert cursors == journal[first : first + len(cursors)]


async def test_a_stalled_link_is_said_on_stderr_and_the_stream_resumes_whole(
    sim: SimFleet, profiles: list[Profile], capsys: pytest.CaptureFixture[str]
) -> None:
    profile = slow_keepalives(profiles[0])
    host = sim.hosts[profile.name]

    async def freeze() -> None:
        host.freeze()  # a partition: the host stops answering, nothing is reset

    async def thaw() -> None:
        host.thaw()

    lines, said = await follow_through(
        profile, capsys, freeze, thaw, lost="link stalled (no answer within 1 s)"
    )
    assert f"{profile.name}: no data for " in said
    assert "reconnecting…" in said
    assert "resumes after the last record shown, nothing skipped or repeated" in said
    assert_gapless(lines, await journal_cursors(profile))


async def test_a_dropped_link_is_said_while_it_is_down_and_when_it_is_back(
    sim: SimFleet, profiles: list[Profile], capsys: pytest.CaptureFixture[str]
) -> None:
    profile = profiles[0]
    host = sim.hosts[profile.name]

    async def offline() -> None:
        await host.go_offline()

    async def online() -> None:
        await host.go_online()

    lines, said = await follow_through(
        profile, capsys, offline, online, lost="link lost", then="no data for "
    )
    assert f"{profile.name}: link lost" in said and "reconnecting…" in said
    assert f"{profile.name}: reconnected after " in said
    assert_gapless(lines, await journal_cursors(profile))


async def test_a_link_lost_under_no_follow_exits_3(
    sim: SimFleet,
    profiles: list[Profile],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    profile = profiles[0]
    real = remote.journal_read

    def read_as_the_link_goes(*args: Any, **kwargs: Any) -> remote.Command:
        sim.hosts[profile.name].abort_connections()
        return real(*args, **kwargs)

    monkeypatch.setattr(remote, "journal_read", read_as_the_link_goes)
    printer = Printer(profile, LineFilter(), as_json=True, stream=sys.stdout)
    assert await tail(profile, printer, lines=10, follow=False) == 3
    said = capsys.readouterr()
    assert said.out == "" and "b300" in said.err
