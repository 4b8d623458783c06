"""Snapshots against real hosts: OpenSSH's sftp-server, the host's openssl, real faults.

The package must hold exactly the host's bytes, pass `sha256sum -c` untouched, and never
contain a half-copied file under a real name, whether the link dies (sshd SIGKILLed) or the
console itself is SIGKILLed in the middle of a transfer.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from console.cli import build_parser
from console.cli.snapshot import cmd_snapshot
from console.local.audit import AuditLog
from console.package.manifest import MANIFEST_NAME, PART_SUFFIX
from tests.testbed import netns
from tests.testbed.bed import Testbed
from tests.testbed.hosts import Host, wait_for
from tests.testbed.layout import UNIT
from tests.testbed.watch import kill_on_file

pytestmark = pytest.mark.testbed

BIG = "big.json"


async def snapshot(bed: Testbed, package: Path, *args: str) -> int:
    argv = ["snapshot", *args, "--package", str(package), "--profiles", str(bed.profiles_dir)]
    return await cmd_snapshot(build_parser().parse_args(argv))


def records(out: str) -> dict[str, dict[str, Any]]:
    found = {}
    for line in out.splitlines():
        data = json.loads(line)
        found[data.get("host") or data["package"]] = data
    return found


def files(root: Path) -> dict[str, tuple[bytes, int]]:
    return {
        p.relative_to(root).as_posix(): (p.read_bytes(), p.stat().st_mtime_ns)
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def sha256sum_check(package: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["sha256sum", "--strict", "-c", MANIFEST_NAME], cwd=package, capture_output=True, text=True
    )


def bench_dir(host: Host) -> Path:
    return host.directory / "root" / "bench_results_opt"


def quiesce(host: Host) -> None:
    """Wait for the server's own bench file, then stop it: the host stops changing."""
    host.wait_healthy()
    wait_for(lambda: (bench_dir(host) / "ddtree_b8_t4_graph.json").exists(), 30, "bench file")
    wait_for(
        lambda: "Decode batch" in host.run("journalctl", "-u", UNIT, "-o", "cat").stdout,
        30,
        "decode lines",
    )
    host.run("systemctl", "stop", UNIT)


async def test_real_sftp_and_host_digests_give_an_identical_checkable_package(
    bed: Testbed, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    await asyncio.gather(*(asyncio.to_thread(quiesce, h) for h in bed.hosts))
    names = [h.name for h in bed.hosts]
    package = tmp_path / "pkg"
    assert await snapshot(bed, package, *names, "--json") == 0
    first = records(capsys.readouterr().out)
    before = files(package)
    hashed = [r for r in AuditLog().read() if r.command.startswith(("openssl", "sha256sum"))]
    assert {r.host for r in hashed} == set(names)
    assert all(r.command.startswith("openssl dgst -sha256 -r /") and r.exit == 0 for r in hashed)

    check = sha256sum_check(package)
    assert check.returncode == 0, check.stdout + check.stderr
    assert check.stdout.count(": OK") == len(before) - 1  # every file but the manifest
    for host in bed.hosts:
        assert first[host.name]["new"]["files"] > 0
        remote = sorted(bench_dir(host).iterdir())
        copies = package / "bench" / f"results_{host.name}"
        assert sorted(p.name for p in copies.iterdir()) == [p.name for p in remote]
        for path in remote:  # the host's bytes and mtime, through the real sftp-server
            copy = copies / path.name
            assert copy.read_bytes() == path.read_bytes()
            assert int(copy.stat().st_mtime) == int(path.stat().st_mtime)
        service = next((package / "services").glob(f"*-{host.name.upper()}-*.service"))
        assert service.read_text().strip() == host.run("systemctl", "cat", UNIT).stdout.strip()
        (meta,) = (package / "snapshots").glob(f"{host.name}-*.json")
        invocation = json.loads(meta.read_text())["invocation"]["id"]
        assert invocation == host.show(UNIT, "InvocationID")["InvocationID"]

    assert await snapshot(bed, package, *names, "--json") == 0
    second = records(capsys.readouterr().out)
    assert files(package) == before  # unchanged hosts: not one byte or mtime rewritten
    for name in names:
        assert second[name]["new"]["files"] == second[name]["kept_both"]["files"] == 0


@pytest.fixture
def big(bed: Testbed) -> Iterator[Path]:
    """A bench file that takes a while to copy, on the first host, whose link is shaped: four
    seconds or more however busy the machine (a fast copy on a starved core finished between
    two looks for its first bytes)."""
    host = bed.hosts[0]
    path = bench_dir(host) / BIG
    with path.open("wb") as fh:
        fh.write(os.urandom(96 << 20))
    with netns.shaped(host.link):
        yield path
    path.unlink(missing_ok=True)


def results(package: Path, host: Host) -> Path:
    """The host's bench directory in the package, made ahead so it can be watched."""
    directory = package / "bench" / f"results_{host.name}"
    directory.mkdir(parents=True, exist_ok=True)
    return directory


def cut_mid_transfer(host: Host, part: Path, timeout: float = 60) -> None:
    """Once bytes are arriving in `part`: freeze the host's sftp-server (the copy stalls
    halfway), then SIGKILL sshd, as a host dying under a transfer would."""

    def arriving() -> bool:
        try:
            return part.stat().st_size > 0
        except FileNotFoundError:
            return False

    wait_for(arriving, timeout, "transfer began", interval=0.001)
    assert host.signal_all("sftp-server", signal.SIGSTOP), "no sftp-server on the host"
    assert host.kill_sshd()
    host.signal_all("sftp-server", signal.SIGKILL)  # stopped: it would never see its EOF


def identical(copy: Path, original: Path) -> bool:
    return copy.read_bytes() == original.read_bytes()


def assert_nothing_partial(package: Path, host: Host) -> None:
    copy = package / "bench" / f"results_{host.name}" / BIG
    assert not copy.exists() or copy.read_bytes() == (bench_dir(host) / BIG).read_bytes()
    if (package / MANIFEST_NAME).exists():
        check = sha256sum_check(package)
        assert check.returncode == 0, check.stdout + check.stderr


@pytest.mark.timeout(300)
async def test_sshd_killed_mid_transfer_leaves_nothing_partial_and_a_rerun_completes(
    bed: Testbed, big: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    host = bed.hosts[0]
    quiesce(host)
    package = tmp_path / "pkg"
    part = results(package, host) / (BIG + PART_SUFFIX)
    run = asyncio.create_task(snapshot(bed, package, host.name))
    await asyncio.to_thread(cut_mid_transfer, host, part)
    assert await run == 1
    out = capsys.readouterr().out
    assert "FAILED" in out and f"/root/bench_results_opt/{BIG} → " in out
    assert not list(package.rglob("*" + PART_SUFFIX))
    assert not (package / "bench" / f"results_{host.name}" / BIG).exists()
    assert not list((package / "snapshots").glob(f"{host.name}-*.json"))  # no claim
    assert_nothing_partial(package, host)

    wait_for(host.sshd_answers, 30, "sshd restarted by systemd")
    assert await snapshot(bed, package, host.name) == 0
    assert identical(package / "bench" / f"results_{host.name}" / BIG, big)
    assert not list(package.rglob("*" + PART_SUFFIX))
    assert sha256sum_check(package).returncode == 0


async def test_a_link_lost_mid_transfer_is_reported_once_as_lost(
    bed: Testbed, big: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    host = bed.hosts[0]
    quiesce(host)
    package = tmp_path / "pkg"
    part = results(package, host) / (BIG + PART_SUFFIX)
    run = asyncio.create_task(snapshot(bed, package, host.name))
    await asyncio.to_thread(cut_mid_transfer, host, part)
    assert await run == 1
    out = capsys.readouterr().out
    assert "connection lost after" in out
    assert "Connection not open" not in out


@pytest.mark.timeout(300)
def test_a_console_killed_mid_transfer_leaves_no_partial_file_under_a_real_name(
    bed: Testbed, big: Path, tmp_path: Path
) -> None:
    host = bed.hosts[0]
    quiesce(host)
    package = tmp_path / "pkg"
    console = [sys.executable, "-m", "console", "snapshot", host.name, "--package", str(package)]
    console += ["--profiles", str(bed.profiles_dir)]
    watched = results(package, host)
    proc = subprocess.Popen(console, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    part = kill_on_file(proc.pid, watched, BIG + PART_SUFFIX, 60)
    output = proc.communicate()[0]
    assert part is not None, f"the transfer never began:\n{output}"
    assert proc.returncode == -signal.SIGKILL, output
    assert_nothing_partial(package, host)
    assert not (package / "bench" / f"results_{host.name}" / BIG).exists()

    rerun = subprocess.run(console, capture_output=True, text=True, timeout=180)
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    assert (package / "bench" / f"results_{host.name}" / BIG).read_bytes() == big.read_bytes()
    assert not list(package.rglob("*" + PART_SUFFIX))  # the killed run's leftover is gone
    assert sha256sum_check(package).returncode == 0
