"""Secrets out of the reproduction package and the audit log; `verify` warns on one left.

Finding of the attack run (issue 20): an `--api-key` value and `HF_TOKEN` went verbatim into
the unit copy, `current_execstart.txt` and the metadata of a package meant to be shared.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from console.cli import build_parser, main, parse_args
from console.cli.set import cmd_set
from console.cli.snapshot import cmd_snapshot
from console.cli.verify import cmd_verify
from console.local.audit import AuditLog, audit_path
from console.package.manifest import write_manifest
from console.service.execline import render_execstart
from console.service.unit import effective_service
from console.sim.fleet import SimFleet
from tests.integration.test_snapshot import UNIT, quiesce

SECRETS = ("sk-live-0123", "hf_s3cr3t", "ghp_pat99", "hunter2", "two words")


async def test_no_secret_reaches_the_package_or_the_audit_log(
    sim: SimFleet, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    host = sim.hosts["b300"]
    service = effective_service(host.unit.cat())
    argv = [*service.argv, "--api-key", "sk-live-0123"]
    dropin = host.root / f"etc/systemd/system/{UNIT}.d/50-operator.conf"
    dropin.parent.mkdir(parents=True, exist_ok=True)
    dropin.write_text(
        "[Service]\nExecStart=\n"
        f"ExecStart={render_execstart(argv)}\n"
        'Environment="HF_TOKEN=hf_s3cr3t" "GH_PAT=ghp_pat99" "DB_PASS=two words"\n'
        "Environment=PROXY_URL=http://ops:hunter2@proxy:3128\n"
    )
    host.unit.daemon_reload()
    await host.unit.restart()
    await quiesce(host)
    # a server that logs its own secrets, as SGLang logs its ServerArgs
    host.journal.append(
        UNIT, "Initialized DDTREE draft runner. ServerArgs(api_key='sk-live-0123', port=30001)"
    )

    package = tmp_path / "pkg"
    argv_cli = ["snapshot", "b300", "--package", str(package), "--profiles", str(sim.profiles_dir)]
    assert await cmd_snapshot(build_parser().parse_args(argv_cli)) == 0
    texts = {
        p.relative_to(package).as_posix(): p.read_text() for p in package.rglob("*") if p.is_file()
    }
    for name in ("services", "current_execstart.txt", "snapshots/", "excerpt"):
        assert any(name in rel for rel in texts), f"no {name} in {sorted(texts)}"
    for rel, text in texts.items():
        for secret in SECRETS:
            assert secret not in text, f"{secret!r} in {rel}"
    (unit_copy,) = [t for r, t in texts.items() if r.startswith("services/")]
    assert "--api-key '***'" in unit_copy or "--api-key ***" in unit_copy
    assert '"HF_TOKEN=***"' in unit_copy and "http://ops:***@proxy:3128" in unit_copy
    (excerpt,) = [t for r, t in texts.items() if "excerpt" in r]
    assert "ServerArgs(api_key='***', port=30001)" in excerpt
    (meta,) = [t for r, t in texts.items() if r.startswith("snapshots/")]
    assert json.loads(meta)["flags"]  # the flags are still there, only secrets hidden
    for record in AuditLog().read():
        assert not any(secret in record.command for secret in SECRETS)

    capsys.readouterr()
    assert cmd_verify(build_parser().parse_args(["verify", str(package)])) == 0
    assert "WARNING" not in capsys.readouterr().out
    (package / "notes.txt").write_text("restart with\nHF_TOKEN=hf_leaked python3 -m x\n")
    write_manifest(package)
    assert cmd_verify(build_parser().parse_args(["verify", str(package)])) == 0
    said = capsys.readouterr().out
    assert "notes.txt:2: a secret-looking value is not redacted" in said
    assert "hf_leaked" not in said


SECRET_FLAGS = """
[flags.api_key]
arg = "--api-key"
type = "str"
secret = true

[flags.hf_token]
env = "HF_TOKEN"
type = "str"
secret = true
"""


async def test_a_secret_flag_set_through_specops_stays_masked_everywhere(
    sim: SimFleet, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The second attack run (issue 30): `set HOST api_key=… hf_token=…` with both flags
    `secret = true`, then `snapshot`: no value on the terminal, in the audit log, in the
    host's history and ledger (written 0600), or anywhere in the package."""
    profile = sim.profiles_dir / "b300.toml"
    profile.write_text(profile.read_text() + SECRET_FLAGS)
    key, token = "sk-SECRET-41", "hf_SECRET_42"
    profiles = ["--profiles", str(sim.profiles_dir)]
    argv = ["set", "b300", f"api_key={key}", f"hf_token={token}", "--yes", "--soak", "1"]
    capsys.readouterr()
    assert await cmd_set(parse_args([*argv, *profiles])) == 0
    said = capsys.readouterr()
    assert key not in said.out + said.err and token not in said.out + said.err
    host = sim.hosts["b300"]
    state = host.local(f"/var/lib/specops/{UNIT}")
    written = [p for p in state.rglob("*") if p.is_file()]
    assert any(p.name == "history.json" for p in written)
    assert any(p.parent.name == "experiments" for p in written)
    for path in written:
        text = path.read_text()
        assert key not in text and token not in text, path
        assert path.stat().st_mode & 0o077 == 0, f"{path} is {oct(path.stat().st_mode)}"
    audit = audit_path().read_text()  # commands and actions (their intent, their drop-in)
    assert "api_key" in audit and key not in audit and token not in audit
    package = tmp_path / "pkg"
    snap = ["snapshot", "b300", "--package", str(package), *profiles]
    assert await cmd_snapshot(parse_args(snap)) == 0
    for path in package.rglob("*"):
        if path.is_file():
            text = path.read_text(errors="replace")
            assert key not in text and token not in text, path
    # Nor does any command that reads the host afterwards print them.
    for command in (["status", "b300"], ["status", "b300", "--json"], ["flags", "b300"],
                    ["flags", "b300", "--json"], ["history", "b300", "--json"],
                    ["compare", "b300", "--json"]):  # fmt: skip
        code = await asyncio.to_thread(main, [*command, *profiles])
        said = capsys.readouterr()
        assert code == 0 and key not in said.out + said.err, command
        assert token not in said.out + said.err, command
    # The drop-in must hold them (systemd passes them on): readable by root alone.
    (dropin,) = host.local(f"/etc/systemd/system/{UNIT}.d").glob("*specops*.conf")
    assert key in dropin.read_text() and dropin.stat().st_mode & 0o077 == 0
    # The server runs with them all the same.
    assert host.unit.loaded is not None and key in host.unit.loaded.argv
    assert host.unit.loaded.env.get("HF_TOKEN") == token
