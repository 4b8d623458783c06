"""`specops snapshot` / `specops verify` against the simulated fleet, through the real client."""

from __future__ import annotations

import asyncio
import gc
import hashlib
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from console.cli import build_parser
from console.cli.snapshot import cmd_snapshot
from console.cli.verify import cmd_verify
from console.findings.host_bench import read_host_bench
from console.hosts.profiles import Profile
from console.package.manifest import MANIFEST_NAME
from console.package.transfer import TransferError, fetch
from console.service.execline import render_execstart
from console.service.unit import effective_service
from console.sim.fleet import SimFleet
from console.sim.host import SimHost
from console.transport.ssh import Disconnected, HostSession

UNIT = "sglang-k26-ddtree.service"
BENCH = "root/bench_results_opt"


async def quiesce(host: SimHost) -> None:
    """Let the service come up and log decode lines, then stop it: the host stops changing."""
    for _ in range(400):
        decodes = [
            e for e in host.journal.entries_after(0) if "Decode batch" in e.fields["MESSAGE"]
        ]
        if len(decodes) >= 3 and (host.root / BENCH / "ddtree_b8_t4_graph.json").exists():
            break
        await asyncio.sleep(0.02)
    else:
        pytest.fail(f"{host.name} never came up")
    await host.unit.stop()


async def snapshot(sim: SimFleet, package: Path, *args: str) -> int:
    argv = ["snapshot", *args, "--package", str(package), "--profiles", str(sim.profiles_dir)]
    return await cmd_snapshot(build_parser().parse_args(argv))


def records(out: str) -> dict[str, dict[str, Any]]:
    found = {}
    for line in out.splitlines():
        data = json.loads(line)
        found[data.get("host") or data["package"]] = data
    return found


def tree(root: Path) -> dict[str, tuple[bytes, int]]:
    return {
        p.relative_to(root).as_posix(): (p.read_bytes(), p.stat().st_mtime_ns)
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def sha256sum_check(package: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["sha256sum", "--strict", "-c", MANIFEST_NAME],
        cwd=package,
        capture_output=True,
        text=True,
    )


async def test_unchanged_hosts_give_a_byte_identical_package_that_sha256sum_accepts(
    sim: SimFleet, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    await asyncio.gather(*(quiesce(h) for h in sim.hosts.values()))
    package = tmp_path / "pkg"
    assert await snapshot(sim, package, "b300", "pro6000", "--json") == 0
    first = records(capsys.readouterr().out)
    before = tree(package)

    assert await snapshot(sim, package, "b300", "pro6000", "--json") == 0
    second = records(capsys.readouterr().out)
    assert tree(package) == before  # same files, same bytes, same mtimes: nothing rewritten
    assert second[str(package)]["manifest_updated"] is False
    for host in ("b300", "pro6000"):
        assert first[host]["new"]["files"] == 11  # 7 bench, excerpt, ExecStart, unit, metadata
        assert second[host]["unchanged"]["files"] == 11
        assert second[host]["new"]["files"] == second[host]["kept_both"]["files"] == 0

    check = sha256sum_check(package)
    assert check.returncode == 0, check.stdout + check.stderr
    assert check.stdout.count(": OK") == len(before) - 1  # every file but the manifest

    # The layout, and what each file holds.
    b300 = sim.hosts["b300"]
    for remote in sorted((b300.root / BENCH).iterdir()):
        copy = package / "bench" / "results_b300" / remote.name
        assert copy.read_bytes() == remote.read_bytes()
        assert int(copy.stat().st_mtime) == int(remote.stat().st_mtime)
    excerpt = (package / "b300_logs" / "journal_excerpt.txt").read_text()
    assert f"# read with: journalctl -u {UNIT} -o json" in excerpt
    assert "'--since=4 hours ago'" in excerpt
    assert "accept len: " in excerpt
    execstart = (package / "b300_logs" / "current_execstart.txt").read_text()
    assert "ExecStart=/opt/sglang/venv/bin/python3 -m sglang.launch_server" in execstart
    assert "--speculative-num-draft-tokens 8" in execstart
    assert "SGLANG_DDTREE_MAX_TOPK=4" in execstart
    assert (package / "services" / "sglang-k26-ddtree-B300-b8t4.service").is_file()

    (meta_path,) = (package / "snapshots").glob("b300-*.json")
    assert first["b300"]["metadata"] == meta_path.relative_to(package).as_posix()
    meta = json.loads(meta_path.read_text())
    assert meta["invocation"]["id"] == b300.unit.invocation_id
    assert meta["sglang_version"] == b300.sglang_version == "0.5.9-ddtree"
    assert meta["flags"] == {
        "budget": 8,
        "topk": 4,
        "cuda_graph": True,
        "nvls": False,
        "max_running": 32,
        "window": 4096,
    }
    accept = meta["statistics"]["accept_len"]
    assert accept["count"] >= 3 and 4.0 < accept["mean"] < 4.6
    assert meta["journal"]["first_cursor"].startswith("s=")
    assert meta["journal"]["excerpt"] == "b300_logs/journal_excerpt.txt"
    assert meta["journal"]["last_cursor"] != meta["journal"]["first_cursor"]
    by_path = {a["path"]: a for a in meta["artifacts"]}
    bench = by_path["bench/results_b300/ddtree_b8_graph.json"]
    assert bench["source"] == "/root/bench_results_opt/ddtree_b8_graph.json"
    assert bench["refetch"].startswith("scp -P ")
    assert bench["refetch"].endswith(
        "root@127.0.0.1:/root/bench_results_opt/ddtree_b8_graph.json "
        "bench/results_b300/ddtree_b8_graph.json"
    )
    unit = by_path["services/sglang-k26-ddtree-B300-b8t4.service"]
    assert unit["refetch"].endswith(f"root@127.0.0.1 'systemctl cat -- {UNIT}'")
    for artifact in meta["artifacts"]:
        data = (package / artifact["path"]).read_bytes()
        assert hashlib.sha256(data).hexdigest() == artifact["sha256"]


async def test_a_connection_killed_mid_transfer_leaves_nothing_partial_and_a_rerun_completes(
    sim: SimFleet, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    host = sim.hosts["b300"]
    big = host.root / BENCH / "big.json"
    big.write_bytes(os.urandom(12 << 20))
    await asyncio.gather(*(quiesce(h) for h in sim.hosts.values()))
    package = tmp_path / "pkg"
    host.sftp_abort_after = 3 << 20  # the link dies with a quarter of big.json sent
    unheard: list[str] = []  # asyncio's "Task exception was never retrieved", and the like
    asyncio.get_running_loop().set_exception_handler(lambda _, c: unheard.append(c["message"]))

    assert await snapshot(sim, package, "b300", "pro6000") == 1
    gc.collect()  # a task whose failure nobody awaited is reported when it is collected
    await asyncio.sleep(0)
    assert unheard == []  # every read of the dropped link was awaited or cancelled
    out = capsys.readouterr().out
    assert "b300" in out and "FAILED" in out
    assert "/root/bench_results_opt/big.json → bench/results_b300/big.json" in out
    assert "connection lost after" in out
    assert not list(package.rglob("*.part"))
    assert not (package / "bench" / "results_b300" / "big.json").exists()
    assert not list((package / "snapshots").glob("b300-*.json"))  # no claim of a snapshot
    # The other host completed, and the package is consistent as it stands.
    assert len(list((package / "bench" / "results_pro6000").iterdir())) == 7
    assert len(list((package / "snapshots").glob("pro6000-*.json"))) == 1
    assert sha256sum_check(package).returncode == 0

    assert await snapshot(sim, package, "b300") == 0
    copy = package / "bench" / "results_b300" / "big.json"
    assert copy.read_bytes() == big.read_bytes()
    assert not list(package.rglob("*.part"))
    assert sha256sum_check(package).returncode == 0


async def test_a_bench_file_changed_on_the_host_keeps_both_versions(
    sim: SimFleet, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    host = sim.hosts["b300"]
    await quiesce(host)
    package = tmp_path / "pkg"
    assert await snapshot(sim, package, "b300", "--json") == 0
    capsys.readouterr()
    old_copy = package / "bench" / "results_b300" / "ddtree_b8_graph.json"
    old_bytes, old_mtime = old_copy.read_bytes(), old_copy.stat().st_mtime_ns

    remote = host.root / BENCH / "ddtree_b8_graph.json"
    new_bytes = remote.read_bytes().replace(b'"backend"', b'"rerun": true, "backend"')
    remote.write_bytes(new_bytes)
    assert await snapshot(sim, package, "b300", "--json") == 0
    result = records(capsys.readouterr().out)["b300"]

    digest = hashlib.sha256(new_bytes).hexdigest()
    new_copy = old_copy.with_name(f"ddtree_b8_graph.{digest[:8]}.json")
    assert result["kept_both_paths"] == [new_copy.relative_to(package).as_posix()]
    assert old_copy.read_bytes() == old_bytes and old_copy.stat().st_mtime_ns == old_mtime
    assert new_copy.read_bytes() == new_bytes
    assert len(list((package / "snapshots").glob("b300-*.json"))) == 2  # both states recorded
    assert sha256sum_check(package).returncode == 0

    # Once both versions are in, neither comes again.
    assert await snapshot(sim, package, "b300", "--json") == 0
    again = records(capsys.readouterr().out)["b300"]
    assert again["kept_both"]["files"] == 0 and again["new"]["files"] == 0


async def test_an_unwritable_package_is_refused_before_any_host_is_contacted(
    sim: SimFleet, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the package's parent should be\n")
    package = blocker / "pkg"
    assert await snapshot(sim, package, "b300", "pro6000") == 1
    error = capsys.readouterr().err
    assert f"package {package}: cannot create it: Not a directory" in error
    for host in sim.hosts.values():
        assert host.commands == []
        assert host.sftp_sessions == 0


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes through directory permissions")
async def test_a_read_only_package_is_refused_before_any_host_is_contacted(
    sim: SimFleet, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    package.chmod(0o555)
    try:
        assert await snapshot(sim, package, "b300") == 1
    finally:
        package.chmod(0o755)
    assert f"package {package}: cannot write in {package}: Permission denied" in (
        capsys.readouterr().err
    )
    assert sim.hosts["b300"].commands == []


async def test_the_service_file_is_named_by_variant_and_holds_the_unit_with_its_drop_ins(
    sim: SimFleet, tmp_path: Path
) -> None:
    host = sim.hosts["b300"]
    service = effective_service(host.unit.cat())
    argv = [*service.argv, "--enable-nccl-nvls"]
    dropin = host.root / f"etc/systemd/system/{UNIT}.d/zz-specops.conf"
    dropin.parent.mkdir(parents=True, exist_ok=True)
    dropin.write_text(f"[Service]\nExecStart=\nExecStart={render_execstart(argv)}\n")
    host.unit.daemon_reload()
    await host.unit.restart()
    await quiesce(host)

    package = tmp_path / "pkg"
    assert await snapshot(sim, package, "b300") == 0
    (unit_file,) = (package / "services").iterdir()
    assert unit_file.name == "sglang-k26-ddtree-B300-nvlsb8t4.service"
    text = unit_file.read_text()
    assert text == host.unit.cat()
    assert f"# /etc/systemd/system/{UNIT}\n" in text
    assert f"# /etc/systemd/system/{UNIT}.d/zz-specops.conf\n" in text
    execstart = (package / "b300_logs" / "current_execstart.txt").read_text()
    assert f"(from /etc/systemd/system/{UNIT}.d/zz-specops.conf)" in execstart
    assert "--enable-nccl-nvls" in execstart


async def test_an_unreachable_host_is_exit_3_and_the_others_still_complete(
    sim: SimFleet, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    await quiesce(sim.hosts["b300"])
    await sim.hosts["pro6000"].go_offline()
    package = tmp_path / "pkg"
    assert await snapshot(sim, package, "b300", "pro6000", "--json") == 3
    result = records(capsys.readouterr().out)
    assert result["b300"]["outcome"] == "ok"
    assert result["pro6000"]["outcome"] == "unreachable"
    assert result["pro6000"]["errors"][0].startswith("unreachable")
    assert sha256sum_check(package).returncode == 0


async def test_verify_lists_mismatched_missing_and_unlisted_files(
    sim: SimFleet, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    await quiesce(sim.hosts["b300"])
    package = tmp_path / "pkg"
    assert await snapshot(sim, package, "b300") == 0
    verify = build_parser().parse_args(["verify", str(package)])
    capsys.readouterr()
    assert cmd_verify(verify) == 0
    assert capsys.readouterr().out.strip() == f"{package}: 11 files OK"

    with (package / "bench" / "results_b300" / "ddtree_b4_graph.json").open("a") as f:
        f.write(" ")
    (package / "b300_logs" / "current_execstart.txt").unlink()
    (package / "notes.txt").write_text("added by hand\n")
    assert cmd_verify(verify) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines == [
        "MISMATCHED  bench/results_b300/ddtree_b4_graph.json",
        "MISSING     b300_logs/current_execstart.txt",
        "UNLISTED    notes.txt",
        f"{package}: 3 problem(s); 9 files OK",
    ]

    (package / MANIFEST_NAME).unlink()
    assert cmd_verify(verify) == 1
    assert "no manifest to verify against" in capsys.readouterr().err
    assert cmd_verify(build_parser().parse_args(["verify", str(tmp_path / "nope")])) == 2


async def test_a_file_that_changed_after_hashing_is_hashed_and_fetched_again(
    sim: SimFleet, profiles: list[Profile], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    session = HostSession(profiles[0])
    session.start()
    assert await session.wait_connected(10)
    source = "/root/bench_results_opt/ddtree_b8_graph.json"
    content = sim.hosts["b300"].local(source).read_bytes()
    stale = hashlib.sha256(b"what the file held when sha256sum ran").hexdigest()
    fetched: list[int] = []
    try:
        async with session.sftp() as sftp:
            placed = await fetch(
                session,
                sftp,
                source,
                tmp_path / "d",
                "x.json",
                digest=stale,
                size=len(content),
                mtime=None,
                progress=fetched.append,
                package=tmp_path,
            )
            assert placed.path.read_bytes() == content
            assert placed.sha256 == hashlib.sha256(content).hexdigest()
            assert sum(fetched) == 2 * len(content)  # read twice: once refused, once kept

            async def always_other(*args: object) -> dict[str, str]:
                return {source: "0" * 64}

            monkeypatch.setattr("console.package.transfer.remote_hashes", always_other)
            with pytest.raises(TransferError, match="the file keeps changing"):
                await fetch(
                    session,
                    sftp,
                    source,
                    tmp_path / "d",
                    "y.json",
                    digest=stale,
                    size=len(content),
                    mtime=None,
                    progress=fetched.append,
                    package=tmp_path,
                )
        assert sorted(p.name for p in (tmp_path / "d").iterdir()) == ["x.json"]
    finally:
        await session.close()


async def test_each_snapshot_names_its_excerpt_so_the_newest_is_found_by_name(
    sim: SimFleet, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    host = sim.hosts["b300"]
    await quiesce(host)
    package = tmp_path / "pkg"
    assert await snapshot(sim, package, "b300") == 0
    (first,) = (package / "snapshots").glob("b300-*.json")
    line = "[2026-12-01 12:00:00 TP0] Decode batch, #running-req: 3, accept len: 9.99, "
    host.journal.append(UNIT, line, _PID="4242", SYSLOG_IDENTIFIER="python3")
    assert await snapshot(sim, package, "b300") == 0
    capsys.readouterr()
    (second,) = set((package / "snapshots").glob("b300-*.json")) - {first}
    oldest, newest = json.loads(first.read_text()), json.loads(second.read_text())
    assert oldest["journal"]["excerpt"] == "b300_logs/journal_excerpt.txt"
    latest = newest["journal"]["excerpt"]
    assert latest != oldest["journal"]["excerpt"]
    assert "accept len: 9.99" in (package / latest).read_text()
    assert "accept len: 9.99" not in (package / "b300_logs/journal_excerpt.txt").read_text()


async def test_the_hosts_bench_files_read_over_a_link_that_dies_leave_no_read_unheard(
    sim: SimFleet, profiles: list[Profile]
) -> None:
    """`b` then `h` (the host's files as they are now): a link that dies under a large file
    is an error naming it, and every read in flight is awaited (asyncssh's own large `read`
    left them failing unheard: "Task exception was never retrieved" on the suite's stderr)."""
    host = sim.hosts["b300"]
    (host.root / BENCH / "big.json").write_bytes(b'{"pad": "' + b"x" * (12 << 20) + b'"}')
    await quiesce(host)
    session = HostSession(next(p for p in profiles if p.name == "b300"))
    session.start()
    unheard: list[str] = []
    asyncio.get_running_loop().set_exception_handler(lambda _, c: unheard.append(c["message"]))
    try:
        await session.wait_settled(10)
        whole = await read_host_bench(session)
        assert "big.json" in {Path(b.path).name for b in whole.files}
        host.sftp_abort_after = 3 << 20  # the link dies a quarter into big.json
        with pytest.raises(Disconnected, match=r"big\.json"):
            await read_host_bench(session)
        gc.collect()  # a task whose failure nobody awaited is reported when it is collected
        await asyncio.sleep(0)
        assert unheard == []
    finally:
        await session.close()
