"""Hostile bench directories on a real host (OpenSSH's sftp-server, the host's openssl).

Findings of the attack run (issue 20): one dangling symlink dropped every later match and
added a false "no file matches"; one odd name (newline, CR, non-UTF-8, 251 bytes) failed the
whole host; a link to /etc/shadow was followed and the copy made 0644; no size cap; a host
file named `*.part` was left out of the manifest. Each odd file is now kept or skipped by
name, and its siblings always arrive.
"""

from __future__ import annotations

import asyncio
import os
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from console.hosts.profiles import Profile
from console.package.layout import plan
from console.package.manifest import MANIFEST_NAME
from console.package.snapshot import HostOutcome, run_snapshot
from tests.testbed.bed import Testbed
from tests.testbed.helpers import connected
from tests.testbed.hosts import Host
from tests.testbed.test_snapshot import bench_dir, quiesce

pytestmark = pytest.mark.testbed

PLAIN = ["a.json", "m.json", "z.json"]


@pytest.fixture
def hostile(bed: Testbed) -> Iterator[tuple[Host, list[str]]]:
    """The first host's bench dir with good files among hostile ones; removed afterwards.

    Yields the host and the names that were there before (the server's own bench files)."""
    host = bed.hosts[0]
    quiesce(host)
    directory = bench_dir(host)
    before = sorted(p.name for p in directory.iterdir() if p.name.endswith(".json"))
    made: list[bytes] = []

    def put(name: str | bytes, data: bytes = b"{}\n", mode: int = 0o644) -> bytes:
        raw = name if isinstance(name, bytes) else name.encode()
        path = os.path.join(bytes(directory), raw)
        with open(path, "wb") as fh:
            fh.write(data)
        os.chmod(path, mode)
        made.append(raw)
        return raw

    def link(name: str, target: str) -> None:
        os.symlink(target, directory / name)
        made.append(name.encode())

    for name in PLAIN:
        put(name, f'{{"name": "{name}"}}\n'.encode())
    link("b_dangling.json", "/root/bench_results_opt/gone.json")
    link("c_outside.json", "/etc/passwd")
    link("d_inside.json", "a.json")
    put("e_secret.json", b'{"private": true}\n', 0o600)
    put("f.json.part", b'{"part": true}\n')
    put("g_back\\slash.json", b'{"backslash": true}\n')
    put("h_new\nline.json")
    put("i_car\rriage.json")
    put(b"j_\xff\xfe.json")
    put("k" * 246 + ".json")  # 251 bytes: `.part` makes 256
    put("l_big.json", b"x" * 4096)
    try:
        yield host, before
    finally:
        for raw in made:
            with_name = os.path.join(bytes(directory), raw)
            if os.path.lexists(with_name):
                os.unlink(with_name)


def capped(profile: Profile) -> Profile:
    bench = (*profile.artifacts.bench, "/root/bench_results_opt/*.part")
    art = profile.artifacts.model_copy(update={"max_file_bytes": 1024, "bench": bench})
    return profile.model_copy(update={"artifacts": art})


async def test_every_good_file_arrives_and_each_odd_one_is_named(
    bed: Testbed, hostile: tuple[Host, list[str]], tmp_path: Path
) -> None:
    host, before = hostile
    (job,) = plan([capped(bed.profile(host.name))], tmp_path / "pkg")
    session = await connected(job.profile)
    try:
        report = await run_snapshot([(job, session)])
    finally:
        await session.close()
    (result,) = report.hosts
    assert result.outcome is HostOutcome.OK, result.errors
    copies = job.package / "bench" / f"results_{host.name}"
    kept = sorted(p.name for p in copies.iterdir())
    odd_but_kept = ["d_inside.json", "e_secret.json", "f.json_part", "g_back\\slash.json"]
    assert kept == sorted([*before, *PLAIN, *odd_but_kept])
    notes = "\n".join(result.notes)
    assert "no file matches" not in notes
    assert "b_dangling.json: skipped: a dangling symlink" in notes
    assert "c_outside.json: skipped: a symlink to /etc/passwd, outside" in notes
    assert "h_new\\nline.json: skipped: its name holds a line break" in notes
    assert "i_car\\rriage.json: skipped: its name holds a line break" in notes
    assert "j_\\xff\\xfe.json: skipped: its name is not UTF-8" in notes
    assert f"{'k' * 246}.json: skipped: its name is too long" in notes
    assert "l_big.json: skipped: 4.0 KiB is over the per-file cap" in notes
    assert "f.json.part: kept as f.json_part" in notes
    # the source's mode, never widened; the content the host has
    assert stat.S_IMODE((copies / "e_secret.json").stat().st_mode) == 0o600
    assert (copies / "f.json_part").read_bytes() == b'{"part": true}\n'
    assert (copies / "d_inside.json").read_bytes() == (copies / "a.json").read_bytes()
    check = await asyncio.to_thread(
        subprocess.run,
        ["sha256sum", "--strict", "-c", MANIFEST_NAME],
        cwd=job.package,
        capture_output=True,
        text=True,
    )
    assert check.returncode == 0, check.stdout + check.stderr
    assert "f.json_part: OK" in check.stdout
    assert "e_secret.json: OK" in check.stdout


async def test_links_out_of_the_bench_dir_are_followed_when_the_profile_allows(
    bed: Testbed, hostile: tuple[Host, list[str]], tmp_path: Path
) -> None:
    host, _ = hostile
    profile = bed.profile(host.name)
    art = profile.artifacts.model_copy(update={"bench_symlinks_anywhere": True})
    (job,) = plan([profile.model_copy(update={"artifacts": art})], tmp_path / "pkg")
    session = await connected(job.profile)
    try:
        (result,) = (await run_snapshot([(job, session)])).hosts
    finally:
        await session.close()
    copy = job.package / "bench" / f"results_{host.name}" / "c_outside.json"
    assert result.outcome is HostOutcome.OK, result.errors
    assert copy.read_bytes() == host.run("cat", "/etc/passwd").stdout.encode()
    passwd_mode = int(host.run("stat", "-c", "%a", "/etc/passwd").stdout, 8)
    assert stat.S_IMODE(copy.stat().st_mode) == passwd_mode


async def test_one_dangling_symlink_costs_no_later_match(bed: Testbed, tmp_path: Path) -> None:
    host = bed.hosts[0]
    quiesce(host)
    directory = bench_dir(host)
    before = sorted(p.name for p in directory.iterdir() if p.name.endswith(".json"))
    os.symlink("/root/bench_results_opt/gone.json", directory / "0_dangling.json")
    try:
        (job,) = plan([bed.profile(host.name)], tmp_path / "pkg")
        session = await connected(job.profile)
        try:
            (result,) = (await run_snapshot([(job, session)])).hosts
        finally:
            await session.close()
    finally:
        os.unlink(directory / "0_dangling.json")
    assert result.outcome is HostOutcome.OK, result.errors
    copies = job.package / "bench" / f"results_{host.name}"
    assert sorted(p.name for p in copies.iterdir()) == before
    assert result.notes == ["/root/bench_results_opt/0_dangling.json: skipped: a dangling symlink"]
