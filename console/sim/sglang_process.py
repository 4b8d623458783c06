"""The simulated SGLang as a real process: what the testbed hosts' systemd unit runs.

On a testbed host `/usr/bin/python3 -m sglang.launch_server …` lands here (through a
two-line `sglang/launch_server.py` shim the testbed installs), so systemd, journald and the
console deal with a real process: its lines on stderr become journal entries, its HTTP port
is a real socket, and a crash is a real SIGKILL that `Restart=on-failure` reacts to. What it
logs and how it behaves by its flags is `console.sim.sglang.SimSGLang`'s, unchanged.

Environment: `SPECOPS_SIM_LOAD_S` (model load time, seconds), `SPECOPS_SIM_DECODE_S`
(seconds between decode lines), `SPECOPS_SIM_BENCH_DIR` (default /root/bench_results_opt), and
the failure timeline's `SPECOPS_SIM_<FIELD>` knobs (`console.sim.failures.FailureTiming`).
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from console.sim.failures import failure_timing_from_env
from console.sim.http import serve_http
from console.sim.sglang import ArgumentError, SimSGLang, Timing, help_text, parse_command

LOAD_ENV = "SPECOPS_SIM_LOAD_S"
DECODE_ENV = "SPECOPS_SIM_DECODE_S"
BENCH_ENV = "SPECOPS_SIM_BENCH_DIR"
BENCH_DIR = Path("/root/bench_results_opt")
MODULE = "sglang.launch_server"


def timing_from_env(env: Mapping[str, str]) -> Timing:
    """Timing from the environment; anything unset keeps SimSGLang's defaults."""
    default = Timing()

    def seconds(name: str, fallback: float) -> float:
        text = env.get(name, "").strip()
        if not text:
            return fallback
        try:
            value = float(text)
        except ValueError:
            raise SystemExit(f"{name}={text!r}: not a number of seconds") from None
        if value < 0:
            raise SystemExit(f"{name}={text!r}: must not be negative")
        return value

    return Timing(
        load_s=seconds(LOAD_ENV, default.load_s),
        decode_interval_s=seconds(DECODE_ENV, default.decode_interval_s),
        failures=failure_timing_from_env(env),
    )


def _emit(message: str, priority: int) -> None:
    # Real SGLang logs through Python logging to stderr; journald stores one entry per line.
    del priority
    sys.stderr.write(message + "\n")
    sys.stderr.flush()


async def serve(argv: Sequence[str], env: Mapping[str, str], bench_dir: Path) -> int:
    """Run the server until it crashes or is killed; returns SimSGLang's exit status."""
    sim = SimSGLang(argv, env, _emit, timing=timing_from_env(env), bench_dir=bench_dir)
    server: asyncio.Server | None = None
    try:
        args = parse_command(argv, env).args
    except ArgumentError:
        pass  # SimSGLang.run reports it the way argparse does, and exits 2
    else:
        server = await asyncio.start_server(
            lambda reader, writer: serve_http(reader, writer, sim.handle_http),
            args.host,
            args.port,
        )
    try:
        return await sim.run()
    finally:
        if server is not None:
            server.close()


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m sglang.launch_server ARGS` (ARGS without the interpreter and module)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if "-h" in args or "--help" in args:
        sys.stdout.write(help_text())
        return 0
    bench_dir = Path(os.environ.get(BENCH_ENV) or BENCH_DIR)
    status = asyncio.run(serve([sys.executable, "-m", MODULE, *args], os.environ, bench_dir))
    if status < 0:
        # SGLang's kill_process_tree ends in a SIGKILL of itself: systemd sees code=killed.
        sys.stderr.flush()
        os.kill(os.getpid(), -status)
        signal.pause()
    return status


if __name__ == "__main__":
    raise SystemExit(main())
