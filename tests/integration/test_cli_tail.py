"""`specops tail` as a user runs it: subprocesses against `specops demo --serve DIR`."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from console.hosts.profiles import Profile, load_fleet
from console.transport import remote
from console.transport.ssh import HostSession
from console.watch.journal import gap_marker, invocation_marker
from tests import pace
from tests.integration.support import served_fleet

UNIT = "sglang-k26-ddtree.service"
SPECOPS = [sys.executable, "-m", "console"]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A headless simulated fleet in its own process, as `specops demo --serve DIR` runs it."""
    with served_fleet(tmp_path_factory.mktemp("fleet"), hosts=1) as directory:
        yield directory


def specops(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*SPECOPS, *args], capture_output=True, text=True, timeout=60)


def wait_for_output(*args: str, want: str, timeout: float = 30.0) -> str:
    deadline = pace.deadline(timeout)
    while True:
        result = specops(*args)
        assert result.returncode == 0, result.stderr
        if want in result.stdout or time.monotonic() > deadline:
            return result.stdout
        time.sleep(0.3)


def profile(served: Path) -> Profile:
    (only,) = load_fleet(served / "profiles")
    return only


def test_default_view_shows_only_matching_lines_and_all_shows_everything(served: Path) -> None:
    profiles = str(served / "profiles")
    patterns = [re.compile(p) for p in profile(served).journal.patterns]
    text = wait_for_output(
        "tail", "--profiles", profiles, "b300", "--no-follow", "-n", "50", want="accept len"
    )
    lines = text.splitlines()
    assert any("Decode batch" in line and "accept len: " in line for line in lines)
    assert all(any(p.search(line) for p in patterns) for line in lines), text
    everything = specops(
        "tail", "--profiles", profiles, "b300", "--no-follow", "-n", "200", "--all"
    )
    assert everything.returncode == 0
    shown = everything.stdout.splitlines()
    assert "The server is fired up and ready to roll!" in everything.stdout
    unmatched = [line for line in shown if not any(p.search(line) for p in patterns)]
    assert any("Load weight end" in line for line in unmatched)
    assert len(shown) > len(lines)

    prefill = specops(
        "tail", "--profiles", profiles, "b300", "--no-follow", "-n", "200", "--grep", "Prefill"
    )
    assert prefill.returncode == 0 and prefill.stdout
    assert all("Prefill batch" in line for line in prefill.stdout.splitlines())

    records = specops("tail", "--profiles", profiles, "b300", "--no-follow", "-n", "30", "--json")
    decoded = [json.loads(line) for line in records.stdout.splitlines()]
    decode = next(r for r in decoded if r["parsed"] and r["parsed"]["kind"] == "decode")
    assert decode["host"] == "b300" and decode["cursor"].startswith("s=")
    assert isinstance(decode["timestamp"], float) and decode["crash"] is None
    assert decode["message"].startswith("[") and "accept len" in decode["message"]
    assert decode["parsed"]["accept_len"] == float(
        re.search(r"accept len: ([\d.]+)", decode["message"]).group(1)  # type: ignore[union-attr]
    )
    assert decode["parsed"]["header"]["ranks"] == {"TP": 0}


def test_usage_errors_name_the_value(served: Path) -> None:
    profiles = str(served / "profiles")
    bad = specops("tail", "--profiles", profiles, "b300", "--grep", "accept (len", "--no-follow")
    assert bad.returncode == 2
    assert "--grep 'accept (len' is not a valid regular expression" in bad.stderr
    both = specops("tail", "--profiles", profiles, "b300", "--grep", "x", "--all")
    assert both.returncode == 2 and "--all and --grep" in both.stderr
    unknown = specops("tail", "--profiles", profiles, "h100", "--no-follow")
    assert unknown.returncode == 2 and "unknown host 'h100'" in unknown.stderr


async def crash_by_budget_16(served: Path) -> None:
    """What an operator might do by hand: budget 16 with CUDA graphs, reload, restart."""
    host_root = served / "hosts" / "b300"
    fragment = (host_root / "etc/systemd/system" / UNIT).read_text()
    match = re.search(r"^ExecStart=(.*?[^\\])$", fragment, re.M | re.S)
    assert match is not None
    exec_start = match.group(1).replace(
        "--speculative-num-draft-tokens 8", "--speculative-num-draft-tokens 16"
    )
    dropin = host_root / "etc/systemd/system" / f"{UNIT}.d" / "zz-test.conf"
    dropin.parent.mkdir(exist_ok=True)
    dropin.write_text(f"[Service]\nExecStart=\nExecStart={exec_start}\n")
    session = HostSession(profile(served))
    session.start()
    try:
        assert await session.wait_connected(10)
        await session.run(remote.systemctl_daemon_reload())
        await session.run(remote.systemctl_restart(UNIT))
    finally:
        await session.close()


async def test_a_crash_in_the_stream_is_reported_in_json(served: Path) -> None:
    profiles = str(served / "profiles")
    follower = await asyncio.create_subprocess_exec(
        *SPECOPS, "tail", "--profiles", profiles, "b300", "--json", "-n", "0",
        stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert follower.stdout is not None
    try:
        first = await asyncio.wait_for(follower.stdout.readline(), 30)  # following now
        assert json.loads(first)["host"] == "b300"
        await crash_by_budget_16(served)
        records: list[dict[str, object]] = []
        while not {"illegal_memory_access", "sigquit"} <= {r["crash"] for r in records}:
            line = await asyncio.wait_for(follower.stdout.readline(), 30)
            assert line, "tail ended before the crash was reported"
            records.append(json.loads(line))
    finally:
        follower.terminate()
        code = await asyncio.wait_for(follower.wait(), 10)
    assert code == 0  # SIGTERM is a normal end of a follow
    crash = next(r for r in records if r["crash"] == "illegal_memory_access")
    assert str(crash["message"]).endswith(
        "Scheduler hit an exception: Traceback (most recent call last):"
    )
    continuation = crash["continuation"]
    assert isinstance(continuation, list)
    assert (
        "torch.AcceleratorError: CUDA error: an illegal memory access was encountered"
        in continuation
    )
    assert crash["invocation"] and crash["new_invocation"] is False
    restart = next(r for r in records if r["new_invocation"])
    assert restart["invocation"] == crash["invocation"]

    # The text view marks the restart even though the filter hides the record carrying it. The
    # window reaches back past the crashed run's first line, however many lines it logged.
    text = specops("tail", "--profiles", profiles, "b300", "--no-follow", "-n", "400").stdout
    assert invocation_marker(str(crash["invocation"])) in text
    assert "CUDA error: an illegal memory access was encountered" in text
    assert gap_marker(1) not in text  # no rate limit was hit
