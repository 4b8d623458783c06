"""`specops demo`: the TUI over an embedded simulated fleet, or that fleet headless (`--serve`).

The simulator and the app are imported when the command runs, never when the CLI loads.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from console.cli.common import EXIT_OK, UsageError, out, require_terminal
from console.cli.tui import run_tui

if TYPE_CHECKING:
    from console.sim.sglang import Timing


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    demo = sub.add_parser("demo", parents=[common], help="the TUI over a simulated GPU fleet")
    demo.add_argument("--hosts", type=int, default=2, help="number of simulated hosts (1-64)")
    demo.add_argument("--serve", metavar="DIR", help="run the fleet headless; files go to DIR")
    demo.add_argument("--load-delay", type=float, default=4.0, help=argparse.SUPPRESS)
    demo.add_argument("--decode-interval", type=float, default=1.0, help=argparse.SUPPRESS)


def run(args: argparse.Namespace) -> int:
    if not 1 <= args.hosts <= 64:
        raise UsageError(f"--hosts {args.hosts}: must be between 1 and 64")
    return run_demo(args)


async def serve_demo(directory: Path, hosts: int, timing: Timing) -> int:
    from console.sim.fleet import SimFleet

    fleet = SimFleet(directory, hosts=hosts, timing=timing)
    await fleet.start()
    out.print(f"simulated fleet of {hosts} host(s) running; profiles in {fleet.profiles_dir}")
    for name, host in fleet.hosts.items():
        out.print(f"  {name}: ssh root@127.0.0.1 -p {host.port}")
    out.print(f"try: specops status --profiles {fleet.profiles_dir}")
    print(f"READY {fleet.profiles_dir}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await fleet.stop()
    return EXIT_OK


def run_demo(args: argparse.Namespace) -> int:
    from console.sim.failures import FailureTiming
    from console.sim.fleet import SimFleet, ThreadedSimFleet
    from console.sim.sglang import Timing

    # The demo's budget > 8 with CUDA graphs dies a few decode batches after ready (the B300's
    # late crash), so trying it shows the soak catching what a start-up check would pass.
    late = FailureTiming(graph_crash="batches")
    timing = Timing(load_s=args.load_delay, decode_interval_s=args.decode_interval, failures=late)
    if args.serve:
        return asyncio.run(serve_demo(Path(args.serve), args.hosts, timing))
    require_terminal()
    with tempfile.TemporaryDirectory(prefix="specops-demo-") as tmp:
        sim = ThreadedSimFleet(SimFleet(Path(tmp), hosts=args.hosts, timing=timing))
        profiles = sim.start()
        try:
            return run_tui(profiles, read_only=args.read_only)
        finally:
            sim.stop()
