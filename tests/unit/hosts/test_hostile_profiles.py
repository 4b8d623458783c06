"""Hostile profiles end in exit 2 naming the file, field and value, never a traceback.

Findings of the attack run (issue 20): tracebacks for a non-UTF-8 profile, a 5000-digit
value, a 100k-character host, a non-ASCII health_path, a bad or passphrase-protected key;
`port = true` taken as 1, `ready_timeout_s = inf`, `min > max` and `min = nan` accepted; a
bad variant format found only after contacting the host; `snapshot` exiting 1 for them.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from console.cli import main

BASE = 'name = "b300"\n[ssh]\nhost = "h"\n{ssh}[service]\nunit = "x.service"\n{service}{rest}'


def write(tmp_path: Path, *, ssh: str = "", service: str = "", rest: str = "") -> Path:
    directory = tmp_path / "profiles"
    directory.mkdir(exist_ok=True)
    text = BASE.format(ssh=ssh, service=service, rest=rest)
    (directory / "b300.toml").write_text(text)
    return directory


@pytest.mark.parametrize(
    ("parts", "said"),
    [
        ({"ssh": 'user = "r\\u00ff"\n', "rest": ""}, None),  # fine: UTF-8 escapes are text
        ({"ssh": "port = true\n"}, "field 'ssh.port' = True"),
        ({"ssh": "port = " + "1" * 5000 + "\n"}, "not valid TOML: Exceeds the limit"),
        ({"ssh": "connect_timeout_s = nan\n"}, "field 'ssh.connect_timeout_s' = nan"),
        ({"service": "ready_timeout_s = inf\n"}, "field 'service.ready_timeout_s' = inf"),
        ({"service": 'health_path = "/h\u00e9alth"\n'}, "field 'service.health_path'"),
        (
            {"rest": '[flags.b]\narg = "--b"\ntype = "int"\nmin = 10\nmax = 1\n'},
            "'min' (10) is greater than 'max' (1)",
        ),
        (
            {"rest": '[flags.b]\narg = "--b"\ntype = "float"\nmin = nan\n'},
            "field 'flags.b.min' = nan",
        ),
        # A package is made to be shared: no glob reaches system files (issue 30).
        (
            {"rest": '[artifacts]\nbench = ["/root/bench/*.json", "/etc/shadow"]\n'},
            "'/etc/shadow': /etc holds the system's files, not benchmark results",
        ),
        (
            {"rest": '[artifacts]\nbench = ["/root/../../etc/*"]\n'},
            "'/root/../../etc/*': a bench glob is a path without '..'",
        ),
        ({"rest": '[artifacts]\nbench = ["~/bench/*.json", "/data/etc/*.json"]\n'}, None),
    ],
)
def test_hostile_values_are_exit_2_naming_the_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], parts: dict[str, str], said: str | None
) -> None:
    directory = write(tmp_path, **parts)
    code = main(["flags", "b300", "--profiles", str(directory), "--json"])
    err = capsys.readouterr().err
    assert "Traceback" not in err
    if said is None:
        assert code != 2
        return
    assert code == 2, err
    assert f"{directory / 'b300.toml'}: " in err and said in " ".join(err.split())


def test_a_non_utf8_profile_and_a_huge_host_are_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    directory = write(tmp_path)
    (directory / "b300.toml").write_bytes(b'name = "b\xff300"\n')
    assert main(["status", "--profiles", str(directory)]) == 2
    assert "not UTF-8: byte 0xff at offset 9" in capsys.readouterr().err
    (directory / "b300.toml").write_text(
        BASE.format(ssh="", service="", rest="").replace('host = "h"', f'host = "{"a" * 100_000}"')
    )
    assert main(["status", "--profiles", str(directory)]) == 2
    err = capsys.readouterr().err
    assert "field 'ssh.host'" in err and "(100002 characters)" in err and len(err) < 1000


@pytest.mark.parametrize("kind", ["passphrase", "garbage", "missing"])
def test_an_unusable_identity_file_is_exit_2_before_any_host(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str
) -> None:
    key = tmp_path / "id_key"
    if kind == "passphrase":
        keygen = ["ssh-keygen", "-q", "-t", "ed25519", "-N", "pw", "-f", str(key)]
        subprocess.run(keygen, check=True)
    elif kind == "garbage":
        key.write_text("not a key\n")
    directory = write(tmp_path, ssh=f'identity_file = "{key}"\nconnect_timeout_s = 1\n')
    assert main(["status", "--profiles", str(directory)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert f"field 'ssh.identity_file' = '{key}'" in err
    assert {
        "passphrase": "passphrase-protected",
        "garbage": "not a private key",
        "missing": "cannot read it",
    }[kind] in err


@pytest.mark.parametrize("variant", ["{budget", "{nope}", "{budget:zz}", "{budget:>300}"])
def test_a_bad_variant_is_exit_2_before_any_host(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], variant: str
) -> None:
    flags = '[flags.budget]\narg = "--b"\ntype = "int"\n'
    directory = write(tmp_path, rest=f'{flags}[artifacts]\nvariant = "{variant}"\n')
    package = tmp_path / "pkg"
    assert main(["snapshot", "b300", "--profiles", str(directory), "--package", str(package)]) == 2
    err = capsys.readouterr().err
    assert "field 'artifacts.variant'" in err
    assert not package.exists() or not any(package.iterdir())
