"""`specops sweep --bench CMD`: the operator's benchmark, run on the host after each window.

The command is the operator's own (e.g. `python3 -m sglang.bench_serving --backend sglang
… --output-file {out}`): split with shlex when the sweep starts, refused there when it does
not parse or has no `{out}`, and sent as one argv (never a script). `{out}` becomes the
cell's result file beside the campaign record on the host
(`/var/lib/specops/UNIT/campaigns/ID-bench/cell-NN.jsonl`, the baseline `baseline.jsonl`);
after the command exits the file is read back and parsed by the bench reader
(console/findings/bench.py), so the cell carries the benchmark's tok/s beside the journal's.
A failed or empty benchmark is the cell's `bench_detail`, never the campaign's end.
"""

from __future__ import annotations

import posixpath
import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from console.findings.bench import parse_bench
from console.ledger import campaigns
from console.transport import remote
from console.transport.ssh import Disconnected, HostSession, RemoteError

OUT = "{out}"
BENCH_TIMEOUT_S = 1800.0
"""How long one cell's benchmark may run (`--bench-timeout`)."""


class BenchCommandError(ValueError):
    """`--bench` cannot be run as given (the message names the flag and the value)."""


def bench_argv(command: str) -> list[str]:
    """The `--bench` command as an argv template; raises BenchCommandError naming why."""
    try:
        argv = shlex.split(command)
    except ValueError as exc:
        raise BenchCommandError(f"--bench {command!r}: {exc}") from None
    if not argv:
        raise BenchCommandError("--bench '': the command is empty")
    if not any(OUT in word for word in argv):
        raise BenchCommandError(
            f"--bench {command!r}: no {OUT} in it; put {OUT} where the command writes its "
            f"result (e.g. --output-file {OUT}), so each cell's file can be read back"
        )
    try:
        remote.bench_command(argv)
    except remote.UnsafeArgument as exc:
        raise BenchCommandError(f"--bench {command!r}: {exc}") from None
    return argv


def result_path(unit: str, campaign_id: str, index: int | None, root: str) -> str:
    """Where cell `index`'s (None: the baseline's) benchmark writes, on the host (ROOT: the
    profile's `service.state_dir`)."""
    name = "baseline.jsonl" if index is None else f"cell-{index + 1:02d}.jsonl"
    return posixpath.join(campaigns.campaigns_dir(unit, root), f"{campaign_id}-bench", name)


@dataclass(frozen=True)
class BenchResult:
    path: str
    tok_s: float | None
    """The benchmark's output throughput (the mean over its records), None when it gave none."""
    detail: str
    """What happened, in words: `3 records` or why there is no number."""


async def run_bench(
    session: HostSession, template: Sequence[str], path: str, *, timeout: float
) -> BenchResult:
    """Run the benchmark with `{out}` as `path`, then read and parse what it wrote."""
    argv = [word.replace(OUT, path) for word in template]
    try:
        await session.run(remote.make_dirs(posixpath.dirname(path)), timeout=30)
        result = await session.run(remote.bench_command(argv), timeout=timeout, check=False)
    except Disconnected:
        raise  # the link, not the benchmark: the sweep stops there
    except RemoteError as exc:
        return BenchResult(path, None, f"not run: {exc}")
    if result.returncode != 0:
        last = (result.stderr.strip().splitlines() or [""])[-1][:200]
        return BenchResult(path, None, f"exit {result.returncode}: {last}".rstrip(": "))
    try:
        text = (await session.run(remote.read_if_exists(path), timeout=60)).stdout
    except Disconnected:
        raise
    except RemoteError as exc:
        return BenchResult(path, None, f"result unreadable: {exc}")
    if not text.strip():
        return BenchResult(path, None, f"wrote nothing to {path}")
    parsed = parse_bench(path, text.encode())
    numbers = [p.throughput for p in parsed.points if p.throughput is not None]
    if not numbers:
        return BenchResult(path, None, f"{parsed.shape.value}: {parsed.detail or 'no throughput'}")
    records = f"{len(numbers)} record" + ("s" if len(numbers) != 1 else "")
    return BenchResult(path, sum(numbers) / len(numbers), records)
