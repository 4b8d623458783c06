"""`specops set` then `specops rollback` on a real host, with a `secret = true` flag among the
values: the audit log names each action for what it is, and the secret reaches the unit
(the server runs with it) but no file of the console's state directory nor of the host's."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from console.local.settings import state_dir
from tests.testbed.bed import Testbed
from tests.testbed.hosts import Host
from tests.testbed.layout import UNIT
from tests.testbed.test_rollout import running_argv

pytestmark = pytest.mark.testbed

SECRET = "sk-XYZ-testbed"
SECRET_FLAG = '\n[flags.api_key]\narg = "--api-key"\ntype = "str"\nsecret = true\n'


def specops(profiles: Path, *argv: str) -> tuple[int, str]:
    command = [sys.executable, "-m", "console", *argv, "--yes", "--soak", "2"]
    proc = subprocess.run(
        [*command, "--profiles", str(profiles)], capture_output=True, text=True, timeout=240
    )
    return proc.returncode, proc.stdout + proc.stderr


def with_a_secret_flag(bed: Testbed, host: Host, directory: Path) -> Path:
    directory.mkdir()
    text = (bed.profiles_dir / f"{host.name}.toml").read_text()
    (directory / f"{host.name}.toml").write_text(text + SECRET_FLAG)
    return directory


def test_set_and_rollback_are_audited_as_such_and_keep_the_secret_out_of_every_record(
    bed: Testbed, tmp_path: Path
) -> None:
    host = bed.hosts[0]
    profiles = with_a_secret_flag(bed, host, tmp_path / "profiles")

    code, said = specops(profiles, "set", host.name, "budget=4", f"api_key={SECRET}")
    assert code == 0, said
    argv = running_argv(host)
    assert argv[argv.index("--api-key") + 1] == SECRET  # the server really runs with it
    code, rolled = specops(profiles, "rollback", host.name)
    assert code == 0, rolled
    assert "--api-key" not in running_argv(host)  # back on the unit's own configuration

    lines = (state_dir() / "audit.jsonl").read_text().splitlines()
    actions = [json.loads(line) for line in lines if '"kind": "action"' in line]
    assert [(a["action"], a["outcome"]) for a in actions] == [
        ("set", "applied"),
        ("rollback", "applied"),
    ]
    assert "api_key unset → ***" in actions[0]["intent"]
    assert SECRET not in said + rolled
    hosts_state = host.directory / "var-lib-specops" / UNIT
    history = json.loads((hosts_state / "history.json").read_text())["entries"]
    assert [e.get("action") for e in history] == ["", "set", "rollback"]
    written = [p for root in (state_dir(), hosts_state) for p in root.rglob("*") if p.is_file()]
    assert any(p.parent.name == "experiments" for p in written)  # the ledger, on both sides
    for path in written:
        assert SECRET not in path.read_text(errors="replace"), path
