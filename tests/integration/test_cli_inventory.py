"""`specops status --inventory …` as a user runs it: the real `ansible-inventory` reads an INI or
YAML inventory (a range, group vars, host_vars, ProxyJump) naming the hosts of
`specops demo --serve DIR`, template profiles give the service, and every host answers."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from console.hosts.inventory import find_ansible_inventory
from console.hosts.profiles import Profile, load_fleet
from tests.integration.support import SPECOPS, served_fleet
from tests.tools import needs

pytestmark = needs(find_ansible_inventory(), "ansible-inventory", "pip install -e '.[test]'")


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Two simulated hosts in their own process, as `specops demo --serve DIR` runs them."""
    with served_fleet(tmp_path_factory.mktemp("fleet"), hosts=2) as directory:
        yield directory


def _env(directory: Path) -> dict[str, str]:
    home = directory / "home"
    home.mkdir(exist_ok=True)
    env = {**os.environ, "HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config")}
    env["XDG_STATE_HOME"] = str(home / ".state")
    return env


def sim_profiles(served: Path) -> list[Profile]:
    return load_fleet(served / "profiles")


def write_templates(served: Path, directory: Path) -> Path:
    """all.toml: how to reach the fleet; sim.toml (the group): the service and its flags."""
    directory.mkdir()
    (directory / "all.toml").write_text(
        f'[ssh]\nknown_hosts = "{served / "known_hosts"}"\n'
        f'config_file = "{served / "ssh_config"}"\nconnect_timeout_s = 5\n'
        '[service]\nunit = "sglang-k26-ddtree.service"\n'
    )
    (directory / "sim.toml").write_text(
        "[service]\nport = 30001\n"
        '[flags.budget]\narg = "--speculative-num-draft-tokens"\ntype = "int"\n'
        '[flags.cuda_graph]\narg = "--disable-cuda-graph"\ntype = "switch"\ninverted = true\n'
    )
    return directory


def status(served: Path, inventory: Path, templates: Path) -> list[dict[str, object]]:
    result = subprocess.run(
        [*SPECOPS, "status", "--inventory", str(inventory), "--profiles", str(templates), "--json"],
        capture_output=True,
        text=True,
        timeout=90,
        env=_env(served),
    )
    assert result.returncode == 0, result.stderr
    return [json.loads(line) for line in result.stdout.splitlines()]


def test_status_over_an_ini_inventory(served: Path, tmp_path: Path) -> None:
    one, two = sim_profiles(served)
    inventory = tmp_path / "hosts.ini"
    inventory.write_text(
        "[sim]\n"
        f"{one.name} ansible_port={one.ssh.port}\n"
        f"{two.name} ansible_port={two.ssh.port} ansible_become=false\n"
        "[sim:vars]\nansible_host=127.0.0.1\nansible_user=root\n"
        f"ansible_ssh_private_key_file={served / 'id_ed25519'}\nansible_become=no\n"
        "[gpu:children]\nsim\n"
    )
    records = status(served, inventory, write_templates(served, tmp_path / "templates"))
    assert [r["host"] for r in records] == [one.name, two.name]
    for record in records:
        assert record["connected"] is True
        assert record["groups"] == ["gpu", "sim"]
        assert record["active_state"] == "active"
        assert record["flags"] == {"budget": 8, "cuda_graph": True}


def test_status_over_a_yaml_inventory_with_a_range_and_a_proxy_jump(
    served: Path, tmp_path: Path
) -> None:
    one, two = sim_profiles(served)
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(
        "all:\n  children:\n    sim:\n      hosts:\n        gpu-[01:02]:\n"
        "      vars:\n        ansible_host: 127.0.0.1\n        ansible_user: root\n"
        f"        ansible_ssh_private_key_file: {served / 'id_ed25519'}\n"
    )
    host_vars = tmp_path / "host_vars"
    host_vars.mkdir()
    (host_vars / "gpu-01.yml").write_text(f"ansible_port: {one.ssh.port}\n")
    # gpu-02 is reached through gpu-01, as `ssh -J` would
    (host_vars / "gpu-02.yml").write_text(
        f"ansible_port: {two.ssh.port}\n"
        f"ansible_ssh_common_args: -o ProxyJump=root@127.0.0.1:{one.ssh.port}\n"
    )
    records = status(served, inventory, write_templates(served, tmp_path / "templates"))
    assert [r["host"] for r in records] == ["gpu-01", "gpu-02"]
    assert all(r["connected"] and r["sub_state"] == "running" for r in records), records


def test_group_selects_the_hosts_of_an_inventory_group(served: Path, tmp_path: Path) -> None:
    one, two = sim_profiles(served)
    inventory = tmp_path / "hosts.ini"
    inventory.write_text(
        f"[first]\n{one.name} ansible_port={one.ssh.port}\n"
        f"[second]\n{two.name} ansible_port={two.ssh.port}\n"
        "[all:vars]\nansible_host=127.0.0.1\nansible_user=root\n"
        f"ansible_ssh_private_key_file={served / 'id_ed25519'}\n"
    )
    templates = write_templates(served, tmp_path / "templates")
    (templates / "sim.toml").rename(templates / "second.toml")  # `first` has all.toml only
    argv = [*SPECOPS, "status", "--inventory", str(inventory), "--profiles", str(templates)]
    result = subprocess.run(
        [*argv, "--group", "second", "--json"], capture_output=True, text=True, env=_env(served)
    )
    assert result.returncode == 0, result.stderr
    assert [json.loads(line)["host"] for line in result.stdout.splitlines()] == [two.name]
    wrong = subprocess.run(
        [*argv, "--group", "third"], capture_output=True, text=True, env=_env(served)
    )
    assert wrong.returncode == 2
    assert "no host is in group 'third'; groups: first, second" in " ".join(wrong.stderr.split())
