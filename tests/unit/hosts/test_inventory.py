"""Hosts from an Ansible inventory: the real `ansible-inventory` reads INI and YAML (ranges,
group vars, host_vars), templates fill in the service, and bad values name host and variable."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from console.cli import main
from console.hosts import inventory
from console.hosts.inventory import find_ansible_inventory, load_inventory_fleet, read_inventory
from console.hosts.profiles import Profile, ProfileError
from tests.tools import needs

pytestmark = needs(find_ansible_inventory(), "ansible-inventory", "pip install -e '.[test]'")

H200 = "h200-a ansible_host=10.0.1.1 ansible_ssh_common_args='-o ProxyJump=jump@bastion:2200'"

INI = f"""\
[b300]
b300-[01:03] ansible_host=10.0.0.1

[b300:vars]
ansible_user=ops
ansible_become=true
ansible_port=2222
ansible_ssh_private_key_file=~/.ssh/fleet_ed25519

[h200]
{H200} ansible_become=no

[gpu:children]
b300
h200
"""

YAML = """\
all:
  vars:
    ansible_user: root
  children:
    gpu:
      children:
        b300:
          hosts:
            b300-[01:03]:
          vars:
            ansible_become: yes
            ansible_ssh_common_args: -J ops@bastion
        pro6000:
          hosts:
            pro6000-a:
              ansible_host: 10.0.2.1
              ansible_port: 2200
"""

ALL = """\
[ssh]
known_hosts = "~/.ssh/fleet_known_hosts"
identity_file = "~/.ssh/default_key"
connect_timeout_s = 7
[service]
unit = "sglang-k26-ddtree.service"
port = 30001
[flags.budget]
arg = "--speculative-num-draft-tokens"
type = "int"
"""

B300 = """\
[service]
unit = "sglang-b300.service"
[flags.cuda_graph]
arg = "--disable-cuda-graph"
type = "switch"
inverted = true
"""


PROXY_COMMAND = "-o ProxyCommand=nc"


def templates(tmp_path: Path, **files: str) -> Path:
    directory = tmp_path / "templates"
    directory.mkdir(exist_ok=True)
    for name, text in files.items():
        (directory / f"{name}.toml").write_text(text)
    return directory


def fleet(tmp_path: Path, text: str, name: str, **files: str) -> dict[str, Profile]:
    source = tmp_path / name
    source.write_text(text)
    directory = templates(tmp_path, **({"all": ALL, "b300": B300} | files))
    return {p.name: p for p in load_inventory_fleet(source, directory)}


def test_ini_ranges_group_vars_and_proxy_jump(tmp_path: Path) -> None:
    hosts = fleet(tmp_path, INI, "hosts.ini")
    assert list(hosts) == ["b300-01", "b300-02", "b300-03", "h200-a"]
    b300 = hosts["b300-02"]
    assert b300.groups == ("gpu", "b300")
    assert (b300.ssh.host, b300.ssh.port, b300.ssh.user) == ("10.0.0.1", 2222, "ops")
    assert b300.ssh.sudo is True  # the INI string "true"
    assert b300.ssh.identity_file == Path("~/.ssh/fleet_ed25519")  # the inventory wins
    assert b300.ssh.known_hosts == Path("~/.ssh/fleet_known_hosts")  # the template's default
    assert b300.ssh.connect_timeout_s == 7
    # all.toml, then b300.toml over it: the unit replaced, a flag added, the port kept
    assert b300.service.unit == "sglang-b300.service"
    assert b300.service.port == 30001
    assert set(b300.flags) == {"budget", "cuda_graph"}
    h200 = hosts["h200-a"]
    assert h200.groups == ("gpu", "h200")
    assert h200.ssh.proxy_jump == "jump@bastion:2200"
    assert h200.ssh.sudo is False  # "no"
    assert h200.ssh.user is None and h200.ssh.port is None
    assert h200.service.unit == "sglang-k26-ddtree.service"
    assert set(h200.flags) == {"budget"}


def test_yaml_ranges_booleans_host_vars_and_a_host_template(tmp_path: Path) -> None:
    (tmp_path / "host_vars").mkdir()
    (tmp_path / "host_vars" / "b300-03.yml").write_text("ansible_host: 10.9.9.3\n")
    host_template = '[service]\nport = 31000\n[ssh]\nhost = "ignored-by-inventory"\n'
    hosts = fleet(tmp_path, YAML, "hosts.yml", **{"b300-01": host_template})
    assert list(hosts) == ["b300-01", "b300-02", "b300-03", "pro6000-a"]
    assert hosts["b300-01"].service.port == 31000  # HOST.toml over b300.toml over all.toml
    assert hosts["b300-01"].service.unit == "sglang-b300.service"
    assert hosts["b300-01"].ssh.host == "ignored-by-inventory"  # no ansible_host: the template's
    assert hosts["b300-02"].ssh.host == "b300-02"  # neither: the inventory name, as Ansible does
    assert hosts["b300-03"].ssh.host == "10.9.9.3"  # host_vars/
    for name in ("b300-01", "b300-02", "b300-03"):
        assert hosts[name].ssh.sudo is True and hosts[name].ssh.user == "root"
        assert hosts[name].ssh.proxy_jump == "ops@bastion"
        assert hosts[name].groups == ("gpu", "b300")
    pro = hosts["pro6000-a"]
    assert (pro.ssh.host, pro.ssh.port, pro.ssh.sudo) == ("10.0.2.1", 2200, False)
    assert pro.groups == ("gpu", "pro6000")


def test_a_saved_listing_is_read_without_ansible(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = tmp_path / "hosts.ini"
    source.write_text(INI)
    program = inventory.find_ansible_inventory()
    assert program is not None
    listing = subprocess.run(
        [program, "-i", str(source), "--list"], capture_output=True, text=True, check=True
    ).stdout
    saved = tmp_path / "inventory.json"
    saved.write_text(listing)
    directory = templates(tmp_path, all=ALL, b300=B300)
    ran = load_inventory_fleet(source, directory)
    monkeypatch.setattr(inventory, "find_ansible_inventory", lambda: None)
    assert load_inventory_fleet(saved, directory) == ran
    with pytest.raises(ProfileError, match="ansible-inventory` is not installed"):
        read_inventory(source)


BASTION_INI = (
    "[b300]\n"
    "bastion ansible_host=10.9.0.1 ansible_user=ops\n"
    "gpu-a ansible_host=10.0.0.5 "
    """ansible_ssh_common_args='-o ProxyCommand="ssh -W %h:%p -q ops@10.9.0.1"'\n"""
    "gpu-b ansible_host=10.0.0.6 "
    """ansible_ssh_common_args='-o "ProxyCommand ssh -W %h:%p -p 2200 -l me jump"'\n"""
)


def test_the_ssh_w_proxy_command_is_read_as_the_proxy_jump_it_means(tmp_path: Path) -> None:
    """The bastion form of most real inventories (NVIDIA DeepOps' example among them) refused
    the whole inventory (issue 41); it means exactly ProxyJump."""
    hosts = fleet(tmp_path, BASTION_INI, "hosts.ini")
    assert hosts["bastion"].ssh.proxy_jump is None
    assert hosts["gpu-a"].ssh.proxy_jump == "ops@10.9.0.1"
    assert hosts["gpu-b"].ssh.proxy_jump == "me@jump:2200"


def test_host_key_options_specops_overrides_are_said_once_per_inventory(tmp_path: Path) -> None:
    """Issue 41: `-o StrictHostKeyChecking=no` was ignored without a word."""
    source = tmp_path / "hosts.ini"
    source.write_text(
        "[b300]\nb300-[01:05] ansible_host=10.0.0.1\n\n[b300:vars]\n"
        "ansible_ssh_common_args='-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null'\n"
    )
    notices: list[str] = []
    profiles = load_inventory_fleet(source, templates(tmp_path, all=ALL), notices)
    assert len(profiles) == 5
    assert len(notices) == 2  # one per option, not one per host
    assert notices[0].startswith(f"{source}: StrictHostKeyChecking=no (b300-01, b300-02, b300-03")
    assert "and 2 more) is not followed" in notices[0] and "specops trust HOST" in notices[0]
    assert "UserKnownHostsFile=/dev/null" in notices[1]


@pytest.mark.parametrize(
    ("command", "why"),
    [
        ("nc -X 5 -x proxy %h %p", "only the `ssh -W %h:%p [USER@]BASTION` form"),
        ("ssh -W %h:%p -i other.pem ops@b", "'-i' is not read"),
        ("ssh -W %h:%p a b", "'b' follows the bastion"),
        ("ssh ops@b", "only the `ssh -W %h:%p [USER@]BASTION` form"),
    ],
)
def test_any_other_proxy_command_is_refused_saying_why(command: str, why: str) -> None:
    with pytest.raises(ValueError, match=re.escape(why)):
        inventory.proxy_command_jump(command)


@pytest.mark.parametrize(
    ("line", "variable", "value"),
    [
        ("ansible_become=maybe", "ansible_become", "maybe"),
        ("ansible_port=ssh", "ansible_port", "ssh"),
        ("ansible_port=70000", "ansible_port", 70000),
        ("ansible_connection=local", "ansible_connection", "local"),
        ("ansible_ssh_common_args='-o ProxyCommand=nc'", "ansible_ssh_common_args", PROXY_COMMAND),
    ],
)
def test_bad_values_name_the_host_the_variable_and_the_value(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], line: str, variable: str, value: object
) -> None:
    source = tmp_path / "hosts.ini"
    source.write_text(f"[b300]\nb300-01 ansible_host=10.0.0.1\n\n[b300:vars]\n{line}\n")
    directory = templates(tmp_path, all=ALL)
    code = main(["status", "--inventory", str(source), "--profiles", str(directory)])
    assert code == 2
    error = " ".join(capsys.readouterr().err.split())  # as printed, unwrapped
    assert f"host 'b300-01': b300.vars.{variable} = {value!r}" in error  # where it was set
    assert str(source) in error


def test_template_errors_stop_before_any_host(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "hosts.ini"
    source.write_text(INI)

    def status(**files: str) -> str:
        directory = tmp_path / f"t{len(list(tmp_path.iterdir()))}"
        directory.mkdir()
        for name, text in files.items():
            (directory / f"{name}.toml").write_text(text)
        assert main(["status", "--inventory", str(source), "--profiles", str(directory)]) == 2
        return " ".join(capsys.readouterr().err.split())

    assert "host 'h200-a': no template profile for it; add one of h200-a.toml" in status(b300=ALL)
    assert "names no group or host" in status(all=ALL, b3000=B300)
    assert "a template must leave out 'name'" in status(all='name = "x"\n' + ALL)
    bad_port = ALL.replace("port = 30001", "port = 0")
    assert "field 'service.port' = 0" in status(all=bad_port)
    missing = "[ssh]\nuser = 'x'\n"
    assert "host b300-01 (templates all.toml)" in status(all=missing)


def test_an_inventory_ansible_cannot_parse_is_an_error(tmp_path: Path) -> None:
    source = tmp_path / "hosts.ini"
    source.write_text("[b300\nnot an inventory ::: [\n")
    with pytest.raises(ProfileError, match="failed"):
        read_inventory(source)


def test_settings_name_the_inventory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "hosts.ini"
    source.write_text("[b300]\nb300-01 ansible_host=10.0.0.1 ansible_become=perhaps\n")
    settings = Path.home() / ".config" / "specops" / "settings.toml"
    settings.parent.mkdir(parents=True)
    settings.write_text(f'inventory = "{source}"\n')
    directory = templates(tmp_path, all=ALL)
    assert main(["status", "--profiles", str(directory)]) == 2
    assert "ansible_become = 'perhaps'" in " ".join(capsys.readouterr().err.split())


def test_the_listing_json_has_what_the_mapping_reads(tmp_path: Path) -> None:
    """The fields read from `ansible-inventory --list` (`_meta.hostvars`, hosts, children)."""
    source = tmp_path / "hosts.ini"
    source.write_text(INI)
    data = read_inventory(source)
    assert data["gpu"]["children"] == ["b300", "h200"]
    assert data["b300"]["hosts"] == ["b300-01", "b300-02", "b300-03"]
    assert data["_meta"]["hostvars"]["b300-01"]["ansible_become"] == "true"


PLAIN = ALL.replace('identity_file = "~/.ssh/default_key"\n', "")

ONE_BAD_EACH = """\
[gpu]
gpu-a ansible_host=127.0.0.1 ansible_port=9
gpu-b ansible_host=127.0.0.1 ansible_ssh_private_key_file=~/.ssh/missing.pem
gpu-c ansible_host=127.0.0.1 ansible_ssh_common_args='-o ProxyCommand="nc -X 5 -x p %h %p"'
gpu-d ansible_host=<10.1.2.3>

[west]
gpu-e ansible_host=127.0.0.1

[west:vars]
ansible_ssh_private_key_file=~/.ssh/west.pem
"""


def test_one_bad_host_is_that_hosts_error_and_the_others_load(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 41: one host's missing key file stopped `status` for every host, with a message
    naming the profile field rather than the inventory variable the user wrote."""
    from console.hosts.profiles import Unusable
    from console.transport.ssh import check_identity

    source = tmp_path / "hosts.ini"
    source.write_text(ONE_BAD_EACH)
    directory = templates(tmp_path, all=PLAIN)
    unusable: list[Unusable] = []
    profiles = load_inventory_fleet(source, directory, [], unusable, check_identity)
    assert [p.name for p in profiles] == ["gpu-a"]
    reasons = {u.name: " ".join(u.reason.split()) for u in unusable}
    assert list(reasons) == ["gpu-b", "gpu-c", "gpu-d", "gpu-e"]
    # set for a group: named by where it was set, as the inventory's author wrote it
    west = "host 'gpu-e': west.vars.ansible_ssh_private_key_file = '~/.ssh/west.pem'"
    assert west in reasons["gpu-e"]
    assert (
        f"{source}: host 'gpu-b': ansible_ssh_private_key_file = '~/.ssh/missing.pem'"
        in (reasons["gpu-b"])
    )
    assert "No such file" in reasons["gpu-b"] and "ssh.identity_file" not in reasons["gpu-b"]
    assert "ansible_ssh_common_args" in reasons["gpu-c"] and "ssh -W" in reasons["gpu-c"]
    assert "<10.1.2.3>" in reasons["gpu-d"]

    # status: the good host is tried (nothing listens on port 9: refused), the others are
    # named with their reason, and none stops the rest.
    args = ["--inventory", str(source), "--profiles", str(directory)]
    assert main(["status", "--json", *args]) == 3
    said = capsys.readouterr()
    records = {r["host"]: r for r in map(json.loads, said.out.splitlines())}
    assert records["gpu-a"]["connection"] == "unreachable"
    assert "127.0.0.1:9" in records["gpu-a"]["detail"]
    for host in unusable:
        assert records[host.name]["connection"] == "unusable"
        assert records[host.name]["error"] == host.reason
    assert " ".join(said.err.split()).count("specops: skipped: ") == 4
    # Asked for by name, an unusable host is exit 2 with its reason.
    assert main(["status", "gpu-b", *args]) == 2
    assert "gpu-b cannot be used: " in " ".join(capsys.readouterr().err.split())
