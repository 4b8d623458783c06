"""`specops demo`: the TUI over an embedded simulated fleet, or that fleet headless (`--serve`).

The demo never touches the operator's own files: its fleet, its state (audit log, ledger cache
saved views) and its reproduction package all live in one demo directory,
kept on quit (the path is printed) unless `--discard` is given. Demo host names reuse the
shipped profiles' names (`b300`, …), which is safe only because the state is the demo's own.
The simulator and the app are imported when the command runs, never when the CLI loads.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import signal
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from console.cli.common import EXIT_OK, UsageError, out, require_terminal
from console.cli.tui import add_follow_option, run_tui
from console.local.settings import STATE_DIR_ENV

MAX_HOSTS = 256
"""console/sim/fleet.py's MAX_HOSTS (the simulator is only imported when the demo runs)."""
DEMO_CUBLAS_AFTER_S = 120.0
"""How long the demo's `max_running=256` runs after ready before cuBLAS fails (late crash)."""
DEMO_GPUS = 8
"""GPUs each demo host's nvidia-smi lists (as the reference H100 answers; mi355 has none)."""

if TYPE_CHECKING:
    from console.sim.sglang import Timing


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    demo = sub.add_parser("demo", parents=[common], help="the TUI over a simulated GPU fleet")
    demo.add_argument(
        "--hosts", type=int, default=2, help=f"number of simulated hosts (1-{MAX_HOSTS})"
    )
    demo.add_argument("--serve", metavar="DIR", help="run the fleet headless; files go to DIR")
    demo.add_argument(
        "--sglang-version",
        metavar="X",
        help="every host runs this SGLang release (default: the hosts mix releases)",
    )
    demo.add_argument(
        "--dir", metavar="DIR", help="the demo's own directory (default: a new one in /tmp)"
    )
    demo.add_argument("--discard", action="store_true", help="remove the demo directory on quit")
    add_follow_option(demo)
    demo.add_argument("--load-delay", type=float, default=4.0, help=argparse.SUPPRESS)
    demo.add_argument("--decode-interval", type=float, default=1.0, help=argparse.SUPPRESS)


def run(args: argparse.Namespace) -> int:
    if not 1 <= args.hosts <= MAX_HOSTS:
        raise UsageError(f"--hosts {args.hosts}: must be between 1 and {MAX_HOSTS}")
    return run_demo(args)


def _versions(args: argparse.Namespace) -> tuple[str, ...]:
    from console.service.catalogue import catalogue
    from console.sim import releases

    if args.sglang_version is None:
        return releases.DEMO_RELEASES
    if not releases.is_release(args.sglang_version):
        known = ", ".join(catalogue().names)
        raise UsageError(f"--sglang-version {args.sglang_version}: not a release (known: {known})")
    return (args.sglang_version,)


async def serve_demo(
    directory: Path, hosts: int, timing: Timing, versions: tuple[str, ...] = ()
) -> int:
    from console.sim.fleet import SimFleet

    fleet = SimFleet(directory, hosts=hosts, timing=timing, versions=versions, gpus=DEMO_GPUS)
    await fleet.start()
    out.print(f"simulated fleet of {hosts} host(s) running; profiles in {fleet.profiles_dir}")
    for name, host in fleet.hosts.items():
        out.print(f"  {name}: ssh root@127.0.0.1 -p {host.port} (SGLang {host.sglang_version})")
    out.print(f"try: specops status --profiles {fleet.profiles_dir}")
    print(f"READY {fleet.profiles_dir}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await fleet.stop()
    return EXIT_OK


@contextlib.contextmanager
def demo_state(directory: Path) -> Iterator[Path]:
    """Point specops's state (audit log, ledger cache, saved views) at `directory/state`."""
    state = directory / "state"
    state.mkdir(parents=True, exist_ok=True, mode=0o700)
    before = os.environ.get(STATE_DIR_ENV)
    os.environ[STATE_DIR_ENV] = str(state)
    try:
        yield state
    finally:
        if before is None:
            os.environ.pop(STATE_DIR_ENV, None)
        else:
            os.environ[STATE_DIR_ENV] = before


def run_demo(args: argparse.Namespace) -> int:
    from console.sim.failures import FailureTiming
    from console.sim.fleet import SimFleet, ThreadedSimFleet
    from console.sim.sglang import Timing

    # The demo's budget > 8 with CUDA graphs dies a few decode batches after ready (the B300's
    # late crash), so trying it shows the soak catching what a start-up check would pass.
    # 200 clients: `max_running=256` runs more than 128 requests, passes its soak and dies in
    # cuBLAS two minutes after ready, so it is kept and then caught by probation.
    late = FailureTiming(graph_crash="batches", requests=200, cublas_after_s=DEMO_CUBLAS_AFTER_S)
    timing = Timing(load_s=args.load_delay, decode_interval_s=args.decode_interval, failures=late)
    versions = _versions(args)
    if args.serve:
        return asyncio.run(serve_demo(Path(args.serve), args.hosts, timing, versions))
    require_terminal()
    directory = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="specops-demo-"))
    try:
        with demo_state(directory):
            sim = ThreadedSimFleet(
                SimFleet(
                    directory, hosts=args.hosts, timing=timing, versions=versions, gpus=DEMO_GPUS
                )
            )
            profiles = sim.start()
            try:
                return run_tui(profiles, read_only=args.read_only, follow=args.follow)
            finally:
                sim.stop()
    finally:
        if args.discard:
            shutil.rmtree(directory, ignore_errors=True)
            print(f"demo directory {directory} removed")
        else:
            print(
                f"demo files kept in {directory} (state/audit.jsonl, state/experiments, package/);"
                f" rm -rf {directory} removes them"
            )
