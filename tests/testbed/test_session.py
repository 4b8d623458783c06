"""HostSession against real sshd: run, stream, TCP, reconnects, keepalive, host keys, ProxyJump."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest

from console.hosts.inventory import load_inventory_fleet
from console.hosts.profiles import Profile, Unusable
from console.transport import remote
from console.transport.remote import Command
from console.transport.ssh import (
    CommandFailed,
    ConnState,
    Disconnected,
    HostKeyRefused,
    HostSession,
    HostState,
    check_identity,
)
from console.watch.unit_starts import read_starts
from tests.testbed.bed import Testbed
from tests.testbed.helpers import accepted_logins, connected, http_get, until
from tests.testbed.hosts import Host
from tests.testbed.layout import UNIT

pytestmark = pytest.mark.testbed


def _seqnum(cursor: str) -> int:
    """The journal's sequence number in a cursor (`i=` field, hex)."""
    fields = dict(part.split("=", 1) for part in cursor.split(";"))
    return int(fields["i"], 16)


async def test_run_stream_and_tcp_against_real_sshd(bed: Testbed) -> None:
    host = bed.hosts[0]
    session = await connected(bed.profile(host.name))
    try:
        props = remote.parse_show((await session.run(remote.systemctl_show(UNIT))).stdout)
        truth = host.show(UNIT, "ActiveState", "InvocationID", "MainPID")
        assert props["ActiveState"] == truth["ActiveState"] == "active"
        assert props["InvocationID"] == truth["InvocationID"]
        assert props["MainPID"] == truth["MainPID"] != "0"

        # The service keeps logging while we read: compare against the host's journal from our
        # first cursor on (no entry skipped or invented) and require a tail no older than the
        # host's own tail just before the read.
        tail_before = host.journal(UNIT, "-n", "5")
        lines: list[str] = []
        async for batch in session.stream(remote.journal_read(UNIT, lines=5)):
            lines.extend(batch)
        cursors = [str(json.loads(line)["__CURSOR"]) for line in lines]
        assert len(cursors) == 5
        since_first = host.journal(UNIT, f"--cursor={cursors[0]}")
        assert cursors == [e["__CURSOR"] for e in since_first[:5]]
        assert _seqnum(cursors[0]) >= _seqnum(str(tail_before[0]["__CURSOR"]))

        with pytest.raises(CommandFailed, match="No such file"):
            await session.run(remote.read_file("/etc/specops-no-such-file"))

        host.wait_healthy()
        assert (await http_get(session, "/health")).startswith("HTTP/1.1 200")
    finally:
        await session.close()


async def test_reconnects_after_sshd_is_killed(bed: Testbed) -> None:
    host = bed.hosts[0]
    states: list[HostState] = []
    session = await connected(bed.profile(host.name), states)
    try:
        restarts = int(host.show("ssh.service", "NRestarts")["NRestarts"])
        follow = asyncio.create_task(session.run(remote.journal_follow(UNIT, None), timeout=None))
        await asyncio.sleep(0.3)
        assert host.kill_sshd(), "no sshd process found on the host"
        with pytest.raises(Disconnected):
            await asyncio.wait_for(follow, 20)
        await until(
            lambda: ConnState.RECONNECTING in [s.state for s in states], 20, "noticed the drop"
        )
        assert await session.wait_connected(30)
        result = await session.run(remote.systemctl_is_active(UNIT))
        assert result.stdout.strip() == "active"
        assert int(host.show("ssh.service", "NRestarts")["NRestarts"]) == restarts + 1
        seen = [s.state for s in states]
        assert ConnState.RECONNECTING in seen and seen[-1] is ConnState.CONNECTED
    finally:
        await session.close()


async def test_keepalive_detects_a_dead_link_and_the_session_comes_back(bed: Testbed) -> None:
    """With the link down no packet says the peer is gone: only SSH keepalives can tell."""
    host = bed.hosts[0]
    states: list[HostState] = []
    session = await connected(bed.profile(host.name, keepalive_interval_s=0.5), states)
    try:
        follow = asyncio.create_task(session.run(remote.journal_follow(UNIT, None), timeout=None))
        await asyncio.sleep(0.3)
        host.link_down()
        # Well inside TCP's own give-up time (minutes), with the link still down:
        await until(lambda: session.state.state is not ConnState.CONNECTED, 20, "keepalive noticed")
        with pytest.raises(Disconnected):
            await asyncio.wait_for(follow, 5)
        host.link_up()
        assert await session.wait_connected(30)
        result = await session.run(remote.systemctl_is_active(UNIT))
        assert result.stdout.strip() == "active"
        seen = [s.state for s in states]
        assert ConnState.RECONNECTING in seen and seen[-1] is ConnState.CONNECTED
    finally:
        host.link_up()
        await session.close()


async def test_link_down_then_up_before_keepalive_fires_keeps_the_session(bed: Testbed) -> None:
    """A short blip is TCP's to absorb: the same connection carries on, nothing is lost."""
    host = bed.hosts[0]
    states: list[HostState] = []
    session = await connected(bed.profile(host.name, keepalive_interval_s=5), states)
    try:
        host.link_down()
        await asyncio.sleep(0.5)
        host.link_up()
        result = await session.run(remote.systemctl_is_active(UNIT), timeout=30)
        assert result.stdout.strip() == "active"
        assert [s.state for s in states] == [ConnState.CONNECTING, ConnState.CONNECTED]
    finally:
        await session.close()


@pytest.mark.parametrize("pinned", ["nothing", "another key"])
async def test_an_unknown_host_key_is_refused_with_its_fingerprint(
    bed: Testbed, tmp_path: Path, pinned: str
) -> None:
    host, other = bed.hosts[0], bed.hosts[-1]
    if pinned == "another key" and other is host:
        pytest.skip("needs two hosts")
    known = tmp_path / "known_hosts"
    if pinned == "nothing":
        known.write_text("")
    else:  # the address pinned to another host's key: a changed key
        other_key = (other.directory / "etc-ssh/ssh_host_ed25519_key.pub").read_text()
        known.write_text(f"{host.address} {' '.join(other_key.split()[:2])}\n")
    accepted_before = accepted_logins(host)
    states: list[HostState] = []
    session = HostSession(bed.profile(host.name, known_hosts=known), on_state=states.append)
    session.start()
    try:
        state = await session.wait_settled(20)
        assert state.state is ConnState.HOST_KEY_REFUSED
        assert state.fingerprint == host.host_key_fingerprint()  # what ssh-keygen -lf says
        with pytest.raises(HostKeyRefused):
            await session.run(remote.systemctl_is_active(UNIT))
        assert ConnState.CONNECTED not in [s.state for s in states]
    finally:
        await session.close()
    assert accepted_logins(host) == accepted_before  # refused before authenticating


async def reaches_through(profile: Profile, target: Host, jump: Host) -> None:
    """`profile` logs in to `target` (its hostname answers), and `target` saw the login come
    from `jump`."""
    session = await connected(profile)
    try:
        result = await session.run(Command(("hostname",)))
        assert result.stdout.strip() == target.name
    finally:
        await session.close()
    assert any(f"for root from {jump.address} " in line for line in accepted_logins(target))


async def test_proxy_jump_through_the_first_host(bed: Testbed) -> None:
    if len(bed.hosts) < 2:
        pytest.skip("ProxyJump needs two hosts")
    jump, target = bed.hosts[0], bed.hosts[1]
    profile = bed.jump_profile()
    assert profile.ssh.proxy_jump == f"root@{jump.address}:22"
    await reaches_through(profile, target, jump)


async def test_the_inventory_bastion_form_reaches_a_host_through_real_openssh(
    bed: Testbed, tmp_path: Path
) -> None:
    """Issue 41: `-o ProxyCommand="ssh -W %h:%p -q USER@BASTION"` (NVIDIA DeepOps' example, and
    most real inventories) is the ProxyJump it means, read by the real ansible-inventory."""
    if len(bed.hosts) < 2:
        pytest.skip("a bastion needs two hosts")
    jump, target = bed.hosts[0], bed.hosts[1]
    proxy = f"ssh -W %h:%p -q root@{jump.address}"
    inventory = tmp_path / "hosts.ini"
    inventory.write_text(
        f"[gpu]\nbastion ansible_host={jump.address}\n"
        f"gpu-b ansible_host={target.address} "
        f"ansible_ssh_common_args='-o ProxyCommand=\"{proxy}\"'\n\n"
        f"[gpu:vars]\nansible_user=root\nansible_ssh_private_key_file={bed.client_key}\n"
    )
    templates = tmp_path / "templates"
    templates.mkdir()
    # The host's own profile as the template, less what the inventory gives: name and address.
    kept, section = [], ""
    for line in (bed.profiles_dir / f"{jump.name}.toml").read_text().splitlines():
        section = line if line.startswith("[") else section
        if (section, line.split(" =")[0]) not in (("", "name"), ("[ssh]", "host")):
            kept.append(line)
    (templates / "all.toml").write_text("\n".join(kept) + "\n")
    unusable: list[Unusable] = []
    profiles = load_inventory_fleet(inventory, templates, [], unusable, check_identity)
    assert unusable == [] and [p.name for p in profiles] == ["bastion", "gpu-b"]
    profile = profiles[1]
    assert profile.ssh.proxy_jump == f"root@{jump.address}"
    await reaches_through(profile, target, jump)


async def test_systemd_start_records_name_each_run_and_the_automatic_restart(bed: Testbed) -> None:
    """What the restarts column reads when the console opens (console/watch/unit_starts.py):
    real systemd 252 and journalctl, an operator's restart, then a kill systemd restarts."""
    host = bed.hosts[0]
    before = host.show(UNIT, "InvocationID")["InvocationID"]
    await asyncio.to_thread(host.run, "systemctl", "restart", UNIT)
    operator = host.show(UNIT, "InvocationID")["InvocationID"]
    killed_at = time.time()
    await asyncio.to_thread(host.kill_service)

    def restarted() -> bool:
        state = host.show(UNIT, "InvocationID", "ActiveState")
        return state["InvocationID"] != operator and state["ActiveState"] == "active"

    await until(restarted, 20, "systemd restarted the killed service")
    now = host.show(UNIT, "InvocationID")["InvocationID"]
    session = await connected(bed.profile(host.name))
    try:
        found = await read_starts(session, UNIT, 600)
    finally:
        await session.close()
    runs = [invocation for _, invocation in found.starts]
    assert runs[-2:] == [operator, now] and before != operator != now
    assert len(found.automatic) >= 1 and found.automatic[-1] >= killed_at - 1
    assert found.starts[-2][0] < found.automatic[-1] < found.starts[-1][0]
