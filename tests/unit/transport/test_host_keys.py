"""Host-key policy in one place: what known_hosts is read, and under which name and port."""

from __future__ import annotations

from pathlib import Path

import asyncssh

from console.hosts.profiles import Profile, parse_profile
from console.transport.ssh import (
    connect_options,
    host_key_identity,
    host_key_line,
    known_hosts_path,
    pinned_keys,
    refusal_detail,
)


def _profile(tmp_path: Path, **ssh: object) -> Profile:
    data = {
        "name": "b300",
        "ssh": {"host": "gpu-alias", **ssh},
        "service": {"unit": "x.service"},
    }
    return parse_profile(data, tmp_path / "b300.toml")


def test_known_hosts_is_passed_even_when_the_profile_names_none(tmp_path: Path) -> None:
    config = tmp_path / "ssh_config"
    config.write_text("Host *\n  UserKnownHostsFile none\n")
    opts = connect_options(_profile(tmp_path, config_file=str(config)))
    assert "known_hosts" in opts  # never left to ssh_config, where `none` disables checking
    resolved = asyncssh.SSHClientConnectionOptions(host="gpu-alias", client_keys=None, **opts)
    assert resolved.known_hosts is not None


def test_an_alias_is_enrolled_as_its_hostname_and_port(tmp_path: Path) -> None:
    config = tmp_path / "ssh_config"
    config.write_text("Host gpu-alias\n  HostName 10.1.2.3\n  Port 2222\n")
    known = tmp_path / "known_hosts"
    profile = _profile(tmp_path, config_file=str(config), known_hosts=str(known))
    assert host_key_identity(profile) == ("10.1.2.3", 2222)
    key = asyncssh.generate_private_key("ssh-ed25519")
    line = host_key_line(*host_key_identity(profile), key)
    assert line.startswith("[10.1.2.3]:2222 ssh-ed25519 ")
    known.write_text(line)
    assert [k.public_data for k in pinned_keys(profile)] == [key.public_data]
    known.write_text(host_key_line("gpu-alias", 2222, key))  # what trust used to write
    assert pinned_keys(profile) == []


def test_refusals_name_what_is_pinned_and_what_is_offered() -> None:
    offered = asyncssh.generate_private_key("ssh-ed25519")
    other = asyncssh.generate_private_key("ssh-ed25519")
    rsa = asyncssh.generate_private_key("ssh-rsa", key_size=2048)
    unknown = asyncssh.HostKeyNotVerifiable("x")
    assert refusal_detail([], offered, unknown) == "not in known_hosts"
    changed = refusal_detail([other], offered, unknown)
    assert changed is not None and changed.startswith("CHANGED")
    assert offered.get_fingerprint() in changed and other.get_fingerprint() in changed
    lost = asyncssh.ConnectionLost("x")
    rsa_only = refusal_detail([rsa], offered, lost)
    assert rsa_only is not None and "pins only ssh-rsa" in rsa_only
    assert refusal_detail([offered], offered, lost) is None  # not about the key
    assert refusal_detail([], offered, lost) is None


def test_ssh_configs_own_known_hosts_file_is_honoured_but_none_is_not(
    tmp_path: Path, isolated_home: Path
) -> None:
    config = tmp_path / "ssh_config"
    config.write_text(
        "Host fleet\n  UserKnownHostsFile ~/fleet_known\nHost *\n  UserKnownHostsFile none\n"
    )
    fleet = _profile(tmp_path, host="fleet", config_file=str(config))
    assert known_hosts_path(fleet) == isolated_home / "fleet_known"
    other = _profile(tmp_path, host="other", config_file=str(config))
    assert known_hosts_path(other) == isolated_home / ".ssh" / "known_hosts"
    assert connect_options(other)["known_hosts"] is not None


def test_aes_gcm_is_offered_first_unless_ssh_config_names_ciphers(tmp_path: Path) -> None:
    """The journal's packets cost a fifth with AES-GCM; an operator's `Ciphers` still wins."""
    opts = connect_options(_profile(tmp_path))
    assert opts["encryption_algs"][:2] == ["aes128-gcm@openssh.com", "aes256-gcm@openssh.com"]
    assert "chacha20-poly1305@openssh.com" in opts["encryption_algs"]  # still accepted
    config = tmp_path / "ssh_config"
    config.write_text("Host *\n  Ciphers chacha20-poly1305@openssh.com\n")
    opts = connect_options(_profile(tmp_path, config_file=str(config)))
    assert "encryption_algs" not in opts
    resolved = asyncssh.SSHClientConnectionOptions(host="gpu-alias", client_keys=None, **opts)
    assert list(resolved.encryption_algs) == [b"chacha20-poly1305@openssh.com"]
