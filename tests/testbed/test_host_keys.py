"""Host-key policy against real sshd: ssh_config cannot switch it off, and refusals say why.

Findings of the attack run (issue 20): `UserKnownHostsFile none` in an ssh_config made the
connection accept any key; a changed key read like an unknown one; an RSA-only pin read like
a network error; `trust` of an ssh_config alias enrolled the alias, not what is checked.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import asyncssh
import pytest

from console.cli import parse_args
from console.cli.status import cmd_status
from console.cli.trust import cmd_trust
from console.transport import remote
from console.transport.ssh import (
    ConnState,
    HostKeyRefused,
    HostSession,
    HostState,
    host_key_line,
)
from tests.testbed.bed import Testbed
from tests.testbed.helpers import QUICK, accepted_logins, connected
from tests.testbed.layout import UNIT

pytestmark = pytest.mark.testbed


async def refused(session: HostSession) -> HostState:
    session.start()
    state = await session.wait_settled(20)
    with pytest.raises(HostKeyRefused) as raised:
        await session.run(remote.systemctl_is_active(UNIT))
    assert state.state is ConnState.HOST_KEY_REFUSED, state
    assert "refused" in str(raised.value)
    return state


@pytest.mark.parametrize("where", ["profile config_file", "~/.ssh/config"])
async def test_user_known_hosts_file_none_does_not_switch_verification_off(
    bed: Testbed, tmp_path: Path, isolated_home: Path, where: str
) -> None:
    host = bed.hosts[0]
    config = "Host *\n  UserKnownHostsFile none\n  StrictHostKeyChecking no\n"
    if where == "~/.ssh/config":
        (isolated_home / ".ssh").mkdir()
        (isolated_home / ".ssh" / "config").write_text(config)
        profile = bed.profile(host.name, known_hosts=None, config_file=None)
    else:
        (tmp_path / "ssh_config").write_text(config)
        profile = bed.profile(host.name, known_hosts=None, config_file=tmp_path / "ssh_config")
    before = accepted_logins(host)
    session = HostSession(profile, backoff=QUICK)
    try:
        state = await refused(session)
        assert state.fingerprint == host.host_key_fingerprint()
        assert state.detail == "not in known_hosts"  # ~/.ssh/known_hosts has no entry
    finally:
        await session.close()
    assert accepted_logins(host) == before


async def test_a_changed_key_says_changed_with_both_fingerprints(
    bed: Testbed, tmp_path: Path
) -> None:
    host = bed.hosts[0]
    old = asyncssh.generate_private_key("ssh-ed25519")
    old_print = old.get_fingerprint("sha256")
    known = tmp_path / "known_hosts"
    known.write_text(host_key_line(host.address, 22, old))
    session = HostSession(bed.profile(host.name, known_hosts=known), backoff=QUICK)
    try:
        session.start()
        state = await session.wait_settled(20)
        assert state.state is ConnState.HOST_KEY_REFUSED
        assert state.detail.startswith("CHANGED")
        assert host.host_key_fingerprint() in state.detail and old_print in state.detail
        with pytest.raises(HostKeyRefused, match="CHANGED"):
            await session.run(remote.systemctl_is_active(UNIT))
    finally:
        await session.close()


async def test_trust_and_status_say_a_changed_key_is_refused(
    bed: Testbed, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The attack run (issue 30): `trust` on a changed key exited 1 where every other command
    says 3, and the text `status` showed only the fingerprint where --json says CHANGED."""
    host = bed.hosts[0]
    config = tmp_path / "ssh_config"
    config.write_text(f"Host gpu-alias\n  HostName {host.address}\n  Port 22\n")
    known = tmp_path / "known_hosts"
    known.write_text(host_key_line(host.address, 22, asyncssh.generate_private_key("ssh-ed25519")))
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    (profiles / f"{host.name}.toml").write_text(_profile_toml(bed, host.name, config, known))
    capsys.readouterr()
    args = argparse.Namespace(host=host.name, yes=True, profiles=str(profiles))
    assert await cmd_trust(args) == 3
    assert "the host key CHANGED" in capsys.readouterr().err
    args.json = True
    assert await cmd_trust(args) == 3
    said = capsys.readouterr()
    record = json.loads(said.out)  # stdout: the one JSON object; the words went to stderr
    assert record["outcome"] == "changed" and record["fingerprint"] == host.host_key_fingerprint()
    assert len(record["pinned"]) == 1 and "the host key CHANGED" in said.err
    assert await cmd_status(parse_args(["status", "--profiles", str(profiles)])) == 3
    shown = capsys.readouterr().out  # at 80 columns: the fingerprints whole, below the table
    assert f"{host.name}: CHANGED: the host offers {host.host_key_fingerprint()}" in shown


async def test_an_rsa_only_pin_is_a_refused_key_not_a_network_error(
    bed: Testbed, tmp_path: Path
) -> None:
    host = bed.hosts[0]  # sshd has an ed25519 host key only
    rsa = asyncssh.generate_private_key("ssh-rsa", key_size=2048)
    known = tmp_path / "known_hosts"
    known.write_text(host_key_line(host.address, 22, rsa))
    session = HostSession(bed.profile(host.name, known_hosts=known), backoff=QUICK)
    try:
        session.start()
        state = await session.wait_settled(20)
        assert state.state is ConnState.HOST_KEY_REFUSED, state
        assert "ssh-rsa" in state.detail and host.host_key_fingerprint() in state.detail
    finally:
        await session.close()


async def test_trust_enrols_the_address_an_ssh_config_alias_resolves_to(
    bed: Testbed, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    host = bed.hosts[0]
    config = tmp_path / "ssh_config"
    config.write_text(f"Host gpu-alias\n  HostName {host.address}\n  Port 22\n")
    known = tmp_path / "known_hosts"
    profile = bed.profile(host.name, host="gpu-alias", config_file=config, known_hosts=known)
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    (profiles / f"{host.name}.toml").write_text(_profile_toml(bed, host.name, config, known))
    args = argparse.Namespace(host=host.name, yes=True, profiles=str(profiles))
    assert await cmd_trust(args) == 0
    assert known.read_text().startswith(f"{host.address} ssh-ed25519 ")
    session = await connected(profile)  # the connection accepts what trust wrote
    await session.close()
    capsys.readouterr()
    assert await cmd_trust(args) == 0
    assert "already trusted" in capsys.readouterr().out
    args.json = True
    assert await cmd_trust(args) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["outcome"] == "already_trusted" and record["address"] == f"{host.address}:22"


def _profile_toml(bed: Testbed, name: str, config: Path, known: Path) -> str:
    text = (bed.profiles_dir / f"{name}.toml").read_text()
    lines = []
    for line in text.splitlines():
        key = line.split("=")[0].strip()
        if key == "host":
            line = 'host = "gpu-alias"'
        elif key == "known_hosts":
            line = f'known_hosts = "{known}"'
        elif key == "config_file":
            line = f'config_file = "{config}"'
        lines.append(line)
    return "\n".join(lines) + "\n"
