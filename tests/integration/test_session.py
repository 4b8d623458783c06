"""HostSession through the real asyncssh client against simulated hosts."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from console.hosts.profiles import Profile
from console.local.audit import AuditRecord
from console.sim.fleet import SimFleet
from console.sim.sglang import Timing
from console.transport import remote
from console.transport.ssh import (
    Backoff,
    CommandFailed,
    CommandRecord,
    ConnState,
    Disconnected,
    HostSession,
    HostState,
)
from tests import pace

QUICK = Backoff(initial_s=0.05, cap_s=0.3)


async def until(predicate, timeout: float = 10.0) -> None:  # type: ignore[no-untyped-def]
    deadline = pace.deadline(timeout)
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.02)


def session_for(profile: Profile, states: list[HostState] | None = None) -> HostSession:
    return HostSession(
        profile, on_state=states.append if states is not None else None, backoff=QUICK
    )


async def test_connect_and_run(profiles: list[Profile]) -> None:
    session = session_for(profiles[0])
    session.start()
    assert await session.wait_connected(10)
    result = await session.run(remote.systemctl_is_active("sglang-k26-ddtree.service"))
    assert result.returncode == 0
    assert result.stdout.strip() == "active"
    props = remote.parse_show(
        (await session.run(remote.systemctl_show(profiles[0].service.unit))).stdout
    )
    assert props["ActiveState"] == "active"
    assert len(props["InvocationID"]) == 32
    await session.close()
    assert session.state.state is ConnState.CLOSED


async def test_nonzero_exit_is_an_error_with_stderr(profiles: list[Profile]) -> None:
    session = session_for(profiles[0])
    session.start()
    await session.wait_connected(10)
    with pytest.raises(CommandFailed, match="No such file"):
        await session.run(remote.read_file("/etc/does-not-exist"))
    result = await session.run(remote.read_file("/etc/does-not-exist"), check=False)
    assert result.returncode == 1
    await session.close()


async def test_stream_yields_complete_lines(sim: SimFleet, profiles: list[Profile]) -> None:
    session = session_for(profiles[0])
    session.start()
    await session.wait_connected(10)
    host = sim.hosts[profiles[0].name]
    for i in range(5):
        host.journal.append("sglang-k26-ddtree.service", f"line {i}")
    lines: list[str] = []
    stream = session.stream(remote.journal_read("sglang-k26-ddtree.service", lines=5))
    async for batch in stream:
        lines.extend(batch)
    assert len(lines) == 5
    assert all(line.startswith("{") and line.endswith("}") for line in lines)
    await session.close()


async def test_dropped_link_is_never_a_success(sim: SimFleet, profiles: list[Profile]) -> None:
    """asyncssh returns returncode None when the link drops; the session raises instead."""
    session = session_for(profiles[0])
    session.start()
    await session.wait_connected(10)
    host = sim.hosts[profiles[0].name]
    follow = asyncio.create_task(
        session.run(remote.journal_follow("sglang-k26-ddtree.service", None), timeout=None)
    )
    await asyncio.sleep(0.3)
    host.abort_connections()
    with pytest.raises(Disconnected):
        await follow
    await session.close()


async def test_a_follower_its_reader_closed_is_audited_as_stopped_not_lost(
    sim: SimFleet, profiles: list[Profile]
) -> None:
    """The audit log said "lost" for every journal follower specops closed itself (issue 30's
    stale texts): a follower closed by its reader is `stopped`; one the link cut stays lost."""
    records: list[CommandRecord] = []
    session = HostSession(profiles[0], backoff=QUICK, on_command=records.append)
    session.start()
    assert await session.wait_connected(10)
    host = sim.hosts[profiles[0].name]
    unit = profiles[0].service.unit
    host.journal.append(unit, "line 0")
    closed = session.stream(remote.journal_follow(unit, None))
    assert await anext(closed)
    await closed.aclose()
    cut = session.stream(remote.journal_follow(unit, None))
    assert await anext(cut)
    host.abort_connections()
    with pytest.raises(Disconnected):
        [_ async for _ in cut]  # read until the cut link ends the stream
    await session.close()
    follows = [r for r in records if "-f" in r.command.split()]
    assert [(r.returncode, r.stopped) for r in follows] == [(None, True), (None, False)]
    assert [
        AuditRecord("t", "b300", "x", None, 0.0, stopped).status for stopped in (True, False)
    ] == [
        "stopped",
        "link lost",
    ]


async def test_reconnects_after_server_aborts(sim: SimFleet, profiles: list[Profile]) -> None:
    states: list[HostState] = []
    session = session_for(profiles[0], states)
    session.start()
    await session.wait_connected(10)
    sim.hosts[profiles[0].name].abort_connections()
    await until(lambda: ConnState.RECONNECTING in [s.state for s in states])
    assert await session.wait_connected(10)
    result = await session.run(remote.systemctl_is_active("sglang-k26-ddtree.service"))
    assert result.stdout.strip() == "active"
    seen = [s.state for s in states]
    assert seen[:2] == [ConnState.CONNECTING, ConnState.CONNECTED]
    assert ConnState.RECONNECTING in seen[2:]
    assert seen[-1] is ConnState.CONNECTED
    await session.close()


async def test_keepalive_detects_a_server_that_stopped_answering(
    sim: SimFleet, profiles: list[Profile]
) -> None:
    """keepalive 0.5 s x 3: a frozen server is noticed in about 2 s, not after TCP's hours."""
    session = session_for(profiles[0])
    session.start()
    await session.wait_connected(10)
    host = sim.hosts[profiles[0].name]
    host.freeze()
    started = time.monotonic()
    await until(lambda: session.state.state is not ConnState.CONNECTED, timeout=10)
    assert time.monotonic() - started < 6
    host.thaw()
    assert await session.wait_connected(15)
    await session.close()


async def test_unreachable_host_comes_back(sim: SimFleet, profiles: list[Profile]) -> None:
    host = sim.hosts[profiles[0].name]
    session = session_for(profiles[0])
    session.start()
    await session.wait_connected(10)
    await host.go_offline()
    await until(lambda: session.state.state is ConnState.UNREACHABLE)
    assert session.state.retry_s is not None  # it tries again; the detail says where
    assert f"{profiles[0].ssh.host}:{profiles[0].ssh_port})" in session.state.detail
    with pytest.raises(Disconnected):
        await session.run(remote.systemctl_is_active("sglang-k26-ddtree.service"))
    await host.go_online()
    assert await session.wait_connected(10)
    await session.close()


async def test_unknown_host_key_is_refused_with_fingerprint(tmp_path: Path) -> None:
    fleet = SimFleet(
        tmp_path / "sim", hosts=2, timing=Timing(load_s=0.2), untrusted=frozenset({"pro6000"})
    )
    from console.hosts.profiles import load_fleet

    await fleet.start()
    try:
        good, bad = load_fleet(fleet.profiles_dir)
        refused = session_for(bad)
        trusted = session_for(good)
        refused.start()
        trusted.start()
        state = await refused.wait_settled(10)
        assert state.state is ConnState.HOST_KEY_REFUSED
        expected = fleet.hosts["pro6000"].host_key.get_fingerprint("sha256")
        assert state.fingerprint == expected
        assert state.fingerprint.startswith("SHA256:")
        assert await trusted.wait_connected(10)
        with pytest.raises(Disconnected, match="host key refused"):
            await refused.run(remote.systemctl_is_active("sglang-k26-ddtree.service"))
        # Nothing ever ran on the refused host.
        assert fleet.hosts["pro6000"].commands == []
        await refused.close()
        await trusted.close()
    finally:
        await fleet.stop()


async def test_tcp_to_service_port_reaches_http(sim: SimFleet, profiles: list[Profile]) -> None:
    session = session_for(profiles[0])
    session.start()
    await session.wait_connected(10)
    await until(
        lambda: (server := sim.hosts[profiles[0].name].unit.server) is not None and server.ready
    )
    reader, writer = await session.open_tcp(profiles[0].service.port)
    writer.write(b"GET /health HTTP/1.0\r\nHost: x\r\n\r\n")
    response = await reader.read()
    assert response.startswith(b"HTTP/1.1 200")
    await session.close()


async def test_sftp_get(sim: SimFleet, profiles: list[Profile], tmp_path: Path) -> None:
    session = session_for(profiles[0])
    session.start()
    await session.wait_connected(10)
    async with session.sftp() as sftp:
        names = sorted(await sftp.glob("/root/bench_results_opt/*.json"))
        assert len(names) == 6
        await sftp.get(names[0], str(tmp_path / "x.json"))
    assert isinstance(names[0], str)
    remote_path = sim.hosts[profiles[0].name].local(names[0])
    assert (tmp_path / "x.json").read_bytes() == remote_path.read_bytes()
    await session.close()


async def test_proxy_jump_through_another_host(sim: SimFleet, profiles: list[Profile]) -> None:
    """ProxyJump: the first hop is checked against the same pinned keys, then tunnelled."""
    jump, target = profiles
    via = target.model_copy(
        update={
            "ssh": target.ssh.model_copy(update={"proxy_jump": f"root@127.0.0.1:{jump.ssh.port}"})
        }
    )
    session = session_for(via)
    session.start()
    assert await session.wait_connected(10)
    result = await session.run(remote.systemctl_is_active("sglang-k26-ddtree.service"))
    assert result.stdout.strip() == "active"
    # The command ran on the target; the jump host only forwarded the connection.
    assert any("is-active" in c for c in sim.hosts[target.name].commands)
    assert not any("is-active" in c for c in sim.hosts[jump.name].commands)
    await session.close()


async def test_sudo_prefixes_only_privileged_commands(
    sim: SimFleet, profiles: list[Profile]
) -> None:
    profile = profiles[0]
    sudo = profile.model_copy(update={"ssh": profile.ssh.model_copy(update={"sudo": True})})
    session = session_for(sudo)
    session.start()
    await session.wait_connected(10)
    await session.run(remote.systemctl_show(profile.service.unit))
    await session.run(remote.systemctl_daemon_reload())
    sent = sim.hosts[profile.name].commands
    assert sent[-2].startswith("systemctl show")
    assert sent[-1] == "sudo -n -- systemctl daemon-reload"
    await session.close()
