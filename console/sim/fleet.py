"""A simulated GPU fleet: N simulated hosts plus the profiles, key and known_hosts to reach them.

`specops demo` runs one in a background thread (its own event loop, like a remote machine);
`specops demo --serve DIR` runs one in the foreground and leaves its files in DIR so every
other command can be pointed at it with `--profiles DIR/profiles`. Tests run one on the
test's own loop.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
from collections.abc import Sequence
from pathlib import Path

import asyncssh

from console.hosts.profiles import Profile, load_fleet
from console.sim.host import SimHost
from console.sim.sglang import Timing

MAX_HOSTS = 256
"""Enough for the 200-host benchmark (bench/hundreds.py)."""

REFERENCE_GPU = "NVIDIA H100 80GB HBM3"
"""The card the simulated nvidia-smi answers as (console/sim/gpus.py; tests/fixtures/gpu)."""
WITHOUT_NVIDIA_SMI = frozenset({"mi355"})
"""Demo hosts whose GPUs are not NVIDIA's: no nvidia-smi (`no GPU tool`)."""

HOST_NAMES = ("b300", "pro6000", "h200", "gb200", "mi355", "l40s", "a100", "rtx6000")

DEMO_COMMENT = (
    "A simulated host of `specops demo` (console/sim). Reachable while the demo fleet runs."
)

PROFILE_TEMPLATE = """\
# {comment}
name = "{name}"

[ssh]
host = "{host}"
port = {port}
user = "root"
identity_file = "{key}"
known_hosts = "{known_hosts}"
config_file = "{ssh_config}"
connect_timeout_s = 5
keepalive_interval_s = {keepalive}
keepalive_count_max = 3
{ssh_extra}
[service]
unit = "sglang-k26-ddtree.service"
port = 30001
ready_timeout_s = {ready_timeout}
soak_s = {soak:g}
smoke = {{ prompt = "2+2=", expect = "4", max_tokens = 8 }}

[journal]
patterns = ["accept len", "DDTREE metrics", "Initialized DDTREE", "cuda graph: (True|False)",
            "cublas", "illegal", "CUBLAS"]

[flags.budget]
arg = "--speculative-num-draft-tokens"
type = "int"
min = 1
max = 1024
help = "DDTree budget: draft tokens verified per step"

[flags.topk]
env = "SGLANG_DDTREE_MAX_TOPK"
type = "int"
min = 1
max = 64
help = "per-position top-k the tree is built from"

[flags.cuda_graph]
arg = "--disable-cuda-graph"
type = "switch"
inverted = true
help = "CUDA graphs (on unless --disable-cuda-graph)"

[flags.nvls]
arg = "--enable-nccl-nvls"
type = "switch"
help = "NCCL NVLS collectives"

[flags.max_running]
arg = "--max-running-requests"
type = "int"
min = 1
max = 4096
help = "maximum running requests"

[flags.window]
arg = "--speculative-draft-window-size"
type = "int"
min = 1
max = 1048576
help = "draft model sliding window (tokens)"

[[metrics]]
name = "ddtree_recent_al"
regex = "DDTREE metrics: .*recent_al=(?P<value>[0-9.]+)"

[artifacts]
package = "{package}"
bench = ["/root/bench_results_opt/*.json"]
variant = "{{nvls}}b{{budget}}t{{topk}}"
"""


def render_profile(
    *,
    name: str,
    port: int,
    key: Path,
    known_hosts: Path,
    ssh_config: Path,
    keepalive: float,
    ready_timeout: float,
    package: Path,
    soak: float = 60.0,
    host: str = "127.0.0.1",
    proxy_jump: str | None = None,
    comment: str = DEMO_COMMENT,
) -> str:
    """A profile (the flags of profiles/b300.toml) for a simulated or testbed host."""
    return PROFILE_TEMPLATE.format(
        comment=comment,
        name=name,
        host=host,
        port=port,
        key=key,
        known_hosts=known_hosts,
        ssh_config=ssh_config,
        keepalive=keepalive,
        ssh_extra=f'proxy_jump = "{proxy_jump}"\n' if proxy_jump else "",
        ready_timeout=ready_timeout,
        soak=soak,
        package=package,
    )


def _key(path: Path) -> asyncssh.SSHKey:
    if path.exists():
        return asyncssh.read_private_key(str(path))
    key = asyncssh.generate_private_key("ssh-ed25519")
    path.parent.mkdir(parents=True, exist_ok=True)
    key.write_private_key(str(path))
    path.chmod(0o600)
    return key


class SimFleet:
    def __init__(
        self,
        directory: Path,
        *,
        hosts: int = 2,
        timing: Timing = Timing(),
        untrusted: frozenset[str] = frozenset(),
        keepalive_s: float = 5.0,
        soak_s: float | None = None,
        versions: Sequence[str] = (),
        gpus: int = 0,
    ) -> None:
        if not 1 <= hosts <= MAX_HOSTS:
            raise ValueError(f"a simulated fleet has 1 to {MAX_HOSTS} hosts")
        self.directory = directory
        self.names = [
            HOST_NAMES[i] if i < len(HOST_NAMES) else f"gpu{i + 1:02d}" for i in range(hosts)
        ]
        self.timing = timing
        self.untrusted = untrusted
        """Hosts whose key is left out of known_hosts (to show a refused host key)."""
        self.keepalive_s = keepalive_s
        self.soak_s = max(1.0, timing.decode_interval_s * 10) if soak_s is None else soak_s
        """The profiles' `service.soak_s`: ten decode lines by default."""
        self.hosts: dict[str, SimHost] = {}
        self.versions = tuple(versions)
        """The SGLang releases the hosts run, in turn (empty: the simulator's default)."""
        self.gpus = gpus
        """GPUs each host's nvidia-smi lists (0: none, no nvidia-smi). They answer as the
        reference H100 does, the one card whose output we captured, whatever the host's
        name; `mi355` (an AMD host) never has nvidia-smi."""

    def version_of(self, index: int) -> str | None:
        """The release of the `index`-th host."""
        return self.versions[index % len(self.versions)] if self.versions else None

    @property
    def profiles_dir(self) -> Path:
        return self.directory / "profiles"

    @property
    def known_hosts(self) -> Path:
        return self.directory / "known_hosts"

    async def start(self) -> list[Profile]:
        d = self.directory
        d.mkdir(parents=True, exist_ok=True)
        client_key = _key(d / "id_ed25519")
        (d / "ssh_config").touch()
        self.profiles_dir.mkdir(exist_ok=True)
        known: list[str] = []
        for index, name in enumerate(self.names):
            host = SimHost(
                name,
                d / "hosts" / name,
                host_key=_key(d / "keys" / f"{name}_host_key"),
                client_key=client_key,
                timing=self.timing,
                sglang_version=self.version_of(index),
            )
            if name not in WITHOUT_NVIDIA_SMI:
                host.gpus = [REFERENCE_GPU] * self.gpus
            await host.start()
            self.hosts[name] = host
            if name not in self.untrusted:
                known.append(host.host_key_line())
            (self.profiles_dir / f"{name}.toml").write_text(
                render_profile(
                    name=name,
                    port=host.port,
                    key=d / "id_ed25519",
                    known_hosts=self.known_hosts,
                    ssh_config=d / "ssh_config",
                    keepalive=self.keepalive_s,
                    ready_timeout=max(30.0, self.timing.load_s * 10),
                    soak=self.soak_s,
                    package=d / "package",
                )
            )
        self.known_hosts.write_text("".join(known))
        ports = {h.port for h in self.hosts.values()}
        for host in self.hosts.values():
            host.jump_ports = ports - {host.port}
        return load_fleet(self.profiles_dir)

    async def stop(self) -> None:
        await asyncio.gather(*(h.stop() for h in self.hosts.values()), return_exceptions=True)


class ThreadedSimFleet:
    """A SimFleet on its own event loop in a daemon thread (the demo's remote machines)."""

    def __init__(self, fleet: SimFleet) -> None:
        self.fleet = fleet
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="sim-fleet", daemon=True
        )

    def start(self, timeout: float = 30.0) -> list[Profile]:
        self._thread.start()
        future = asyncio.run_coroutine_threadsafe(self.fleet.start(), self._loop)
        return future.result(timeout)

    def stop(self, timeout: float = 10.0) -> None:
        if not self._thread.is_alive():
            return
        future = asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop)
        with contextlib.suppress(concurrent.futures.TimeoutError, OSError):
            future.result(timeout)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout)
        if not self._thread.is_alive():
            self._loop.close()

    async def _shutdown(self) -> None:
        """Stop the hosts, then cancel and await what their connections still ran (a
        `journalctl -f` being served): a task left pending is reported on stderr when the
        loop is collected ("Task was destroyed but it is pending!")."""
        await self.fleet.stop()
        left = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in left:
            task.cancel()
        await asyncio.gather(*left, return_exceptions=True)
