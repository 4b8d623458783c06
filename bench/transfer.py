"""Snapshot transfer: specops' SFTP fetch of an artifact set vs `scp` of the same files.

Both clients fetch the same files from the same real OpenSSH server in the same run. The
server is a private sshd started here on 127.0.0.1 (its own host key, authorized_keys and
config in a temporary directory, in a private mount namespace for its /run/sshd), so nothing
in ~/.ssh or /etc/ssh is read or changed; it is killed, and the directory removed, at the end.

- **scp**: `scp -q root@127.0.0.1:SRC/* DEST` as an operator would type it (OpenSSH ≥ 9 speaks
  SFTP underneath). `+ fsync` also fsyncs every copy, as specops does; `+ verify` then runs
  the host's `sha256sum` and `sha256sum -c` on the copies: scp with specops' guarantee.
- **specops**: the snapshot's real path through a HostSession: the host's digests (`openssl
  dgst`), each file into `NAME.part`, checked against the host's digest, fsynced and linked
  into place (console/package/digests.py `HostDigests`, console/package/transfer.py
  `fetch` + `run_bounded`, called as console/package/snapshot.py calls them).
- **sftp only**: asyncssh's `mget` of the same files with its defaults, no verification, no
  fsync: what the SSH/SFTP layer alone costs.

Every client runs twice over: with the cipher each side negotiates by default, and with
`--cipher` (scp `-c`, specops through `Ciphers` in its profile's ssh_config). `vs_scp`
compares a row with plain scp using the same cipher; runs are interleaved.

Times include connecting. CPU is split into the client (the process that fetched, plus its
children) and the server (sshd and sftp-server), because on a small machine they compete.

    python3 -m bench.transfer [--mb 1024] [--large 4] [--small 200] [--runs 3] [--cipher C]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import json
import os
import posixpath
import resource
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncssh

from bench.harness import console, openssh_options, report, unwind_on_signals
from console.hosts.profiles import Profile, parse_profile
from console.package.digests import HostDigests
from console.package.transfer import FileJob, fetch, run_bounded
from console.transport.ssh import HostSession, connect_options

SSHD = "/usr/sbin/sshd"
SFTP_SERVER = "/usr/lib/openssh/sftp-server"
SSHD_CONFIG = """\
ListenAddress 127.0.0.1
Port {port}
HostKey {directory}/host_ed25519
AuthorizedKeysFile {directory}/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
PidFile {directory}/sshd.pid
Subsystem sftp {sftp_server}
"""
# sshd insists on its privilege-separation directory; a private tmpfs /run provides it
# without touching the machine's /run. With `exec`, the PID we hold is sshd's own.
NAMESPACE = (
    *("unshare", "--mount", "--propagation", "private", "sh", "-c"),
    "mount -t tmpfs -o mode=0755 specops-bench /run && mkdir -m 0755 /run/sshd"
    ' && exec "$0" -D -e -f "$1"',
)
SMALL_BYTES = 64 << 10
"""The small files are JSON of up to this size (benchmark results, metrics dumps)."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def keygen(path: Path, comment: str) -> None:
    argv = ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)]
    subprocess.run(argv, check=True, capture_output=True)


@dataclass
class Sshd:
    directory: Path
    port: int
    process: subprocess.Popen[bytes]

    def options(self, *extra: str) -> list[str]:
        """OpenSSH client options: our key, our known_hosts (strict), no user config."""
        return openssh_options(self.directory, *extra)

    def profile(self, ssh_config: Path) -> Profile:
        """A specops profile for this server, reading only `ssh_config` (not ~/.ssh/config)."""
        d = self.directory
        data = {
            "name": "bench-sshd",
            "ssh": {
                "host": "127.0.0.1",
                "port": self.port,
                "user": "root",
                "identity_file": str(d / "id_ed25519"),
                "known_hosts": str(d / "known_hosts"),
                "config_file": str(ssh_config),
            },
            "service": {"unit": "bench.service"},
        }
        return parse_profile(data, d / "bench-sshd.toml")

    def cpu_s(self) -> float:
        """CPU of the listener and every session process it has reaped (sftp-server too)."""
        fields = Path(f"/proc/{self.process.pid}/stat").read_text().rpartition(")")[2].split()
        ticks = sum(int(v) for v in fields[11:15])  # utime stime cutime cstime
        return ticks / os.sysconf("SC_CLK_TCK")


@contextlib.contextmanager
def private_sshd(directory: Path) -> Iterator[Sshd]:
    """A real OpenSSH server on 127.0.0.1 for root with a generated key; killed on exit."""
    keygen(directory / "host_ed25519", "bench-host")
    keygen(directory / "id_ed25519", "bench-client")
    shutil.copy(directory / "id_ed25519.pub", directory / "authorized_keys")
    (directory / "ssh_config").write_text("")
    port = free_port()
    sftp_server = SFTP_SERVER if Path(SFTP_SERVER).exists() else "internal-sftp"
    config = directory / "sshd_config"
    config.write_text(SSHD_CONFIG.format(port=port, directory=directory, sftp_server=sftp_server))
    host_key = (directory / "host_ed25519.pub").read_text().split()
    (directory / "known_hosts").write_text(f"[127.0.0.1]:{port} {host_key[0]} {host_key[1]}\n")
    log_path = directory / "sshd.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [*NAMESPACE, SSHD, str(config)],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
        )
    try:
        deadline = time.monotonic() + 10
        while b"Server listening" not in log_path.read_bytes():
            if process.poll() is not None or time.monotonic() > deadline:
                tail = log_path.read_text(errors="replace")[-2000:]
                raise RuntimeError(f"sshd did not start (log {log_path}):\n{tail}")
            time.sleep(0.02)
        yield Sshd(directory, port, process)
    finally:
        if process.poll() is None:
            os.kill(process.pid, signal.SIGTERM)
            try:
                process.wait(5)
            except subprocess.TimeoutExpired:
                os.kill(process.pid, signal.SIGKILL)
                process.wait()


# --- the artifact set ---------------------------------------------------------------------


def small_json(index: int, size: int) -> bytes:
    """A benchmark-result-like JSON document of about `size` bytes."""
    rng = int.from_bytes(os.urandom(4))
    rows = []
    for step in range(size // 60):  # each row is about 60 bytes of JSON
        rng = (rng * 1103515245 + 12345) & 0x7FFFFFFF
        rows.append({"step": step, "accept_len": rng % 997 / 100, "tok_s": rng % 100_003 / 10})
    return json.dumps({"run": index, "rows": rows}).encode()


def make_artifacts(directory: Path, total_mb: int, large: int, small: int) -> list[Path]:
    """`large` random binary files plus `small` JSON files, `total_mb` MiB in all."""
    directory.mkdir()
    total = total_mb << 20
    paths = []
    small_total = 0
    for i in range(small):
        size = min(SMALL_BYTES, 4096 + (i * 7919) % SMALL_BYTES)
        path = directory / f"result_{i:04d}.json"
        data = small_json(i, size)
        path.write_bytes(data)
        small_total += len(data)
        paths.append(path)
    remaining = max(0, total - small_total)
    for i in range(large):  # none with --large 0: only the JSON files
        size = remaining // large + (remaining % large if i == large - 1 else 0)
        path = directory / f"checkpoint_{i}.bin"
        with path.open("wb") as f:
            while size > 0:
                n = min(size, 8 << 20)
                f.write(os.urandom(n))
                size -= n
        paths.append(path)
    return paths


def received(dest: Path, sources: list[Path]) -> None:
    """Every source arrived with its size (specops also checks content; scp is trusted)."""
    for src in sources:
        got = dest / src.name
        if not got.is_file() or got.stat().st_size != src.stat().st_size:
            raise RuntimeError(f"{got}: missing or wrong size after the transfer")


def fsync_all(dest: Path) -> None:
    for path in dest.iterdir():
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    fd = os.open(dest, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# --- the clients --------------------------------------------------------------------------


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


@dataclass
class Measured:
    seconds: float
    client_cpu_s: float


def run_scp(sshd: Sshd, src: Path, dest: Path, cipher: str | None, then: str = "") -> Measured:
    """`scp`, then optionally fsync every file, or verify them as specops does.

    `verify` is what an operator types for specops' guarantee: the host's `sha256sum` of the
    files, then `sha256sum -c` of the copies, one after the other.
    """
    options = sshd.options(*(["-c", cipher] if cipher else []))
    target = "root@127.0.0.1"
    dest.mkdir()
    cpu0, own0 = children_cpu(), time.process_time()
    t0 = time.monotonic()
    copy = ["scp", "-q", *options, "-P", str(sshd.port), f"{target}:{src}/*", f"{dest}/"]
    subprocess.run(copy, check=True, capture_output=True)
    if then == "fsync":
        fsync_all(dest)
    elif then == "verify":
        remote = f"cd {shlex.quote(str(src))} && sha256sum -- *"
        ssh = ["ssh", *options, "-p", str(sshd.port), target, remote]
        sums = subprocess.run(ssh, check=True, capture_output=True).stdout
        check = ["sha256sum", "--quiet", "--strict", "-c", "-"]
        subprocess.run(check, input=sums, cwd=dest, check=True, capture_output=True)
    seconds = time.monotonic() - t0
    return Measured(seconds, children_cpu() - cpu0 + time.process_time() - own0)


async def _connected(profile: Profile) -> HostSession:
    session = HostSession(profile)
    session.start()
    if not await session.wait_connected(10):
        raise RuntimeError(f"specops could not connect: {session.state.detail}")
    return session


async def run_specops(profile: Profile, src: Path, dest: Path) -> Measured:
    """What console/package/snapshot.py does with one host's bench files: list, then fetch each."""
    cpu0 = time.process_time()
    t0 = time.monotonic()
    await asyncio.to_thread(dest.mkdir)
    session = await _connected(profile)
    try:
        async with session.sftp() as sftp:
            files = []
            for path in sorted(await sftp.glob(f"{src}/*")):
                assert isinstance(path, str)
                files.append((path, (await sftp.stat(path)).size or 0))
            async with HostDigests(session, files) as digests:

                async def one(path: str, size: int) -> None:
                    await fetch(
                        session,
                        sftp,
                        path,
                        dest,
                        posixpath.basename(path),
                        digest=digests,
                        size=size,
                        mtime=None,
                        progress=lambda n: None,
                        package=dest,
                    )

                await run_bounded(
                    FileJob(posixpath.basename(p), n, functools.partial(one, p, n))
                    for p, n in files
                )
    finally:
        await session.close()
    return Measured(time.monotonic() - t0, time.process_time() - cpu0)


async def run_sftp_only(profile: Profile, src: Path, dest: Path) -> Measured:
    cpu0 = time.process_time()
    t0 = time.monotonic()
    await asyncio.to_thread(dest.mkdir)
    session = await _connected(profile)
    try:
        async with session.sftp() as sftp:
            await sftp.mget(f"{src}/*", str(dest))
    finally:
        await session.close()
    return Measured(time.monotonic() - t0, time.process_time() - cpu0)


async def asyncssh_cipher(profile: Profile) -> str:
    """What asyncssh negotiates with this profile (connect_options, as specops connects)."""
    async with asyncssh.connect("127.0.0.1", **connect_options(profile)) as conn:
        return str(conn.get_extra_info("recv_cipher"))


def openssh_cipher(sshd: Sshd, cipher: str | None) -> str:
    """What `ssh -v` reports for the server→client direction (the one carrying the files)."""
    extra = ["-c", cipher] if cipher else []
    argv = ["ssh", "-v", *sshd.options("-p", str(sshd.port), *extra), "root@127.0.0.1", "true"]
    err = subprocess.run(argv, check=True, capture_output=True, text=True).stderr
    for line in err.splitlines():
        if "kex: server->client cipher:" in line:
            words = line.split()
            return words[words.index("cipher:") + 1]
    raise RuntimeError("ssh -v did not report the negotiated cipher")


# --- the run ------------------------------------------------------------------------------


Fetcher = Callable[[Profile, Path, Path], Coroutine[Any, Any, Measured]]


@dataclass
class Client:
    name: str
    cipher: str
    baseline: str
    """The scp row with the same cipher, which `vs_scp` compares against."""
    once: Callable[[Path], Measured]
    samples: list[dict[str, float]]


def measure(client: Client, sshd: Sshd, dest: Path, sources: list[Path]) -> None:
    target = dest / f"run-{len(client.samples)}"
    server0 = sshd.cpu_s()
    m = client.once(target)
    time.sleep(0.2)  # let the session's sshd exit and be reaped into the listener's CPU
    server = sshd.cpu_s() - server0
    client.samples.append({"s": m.seconds, "client": m.client_cpu_s, "server": server})
    received(target, sources)
    shutil.rmtree(target)


def clients(sshd: Sshd, src: Path, cipher: str) -> list[Client]:
    """scp and specops as each negotiates by default, then both told to use `cipher`."""
    default = sshd.profile(sshd.directory / "ssh_config")
    chosen = sshd.directory / "ssh_config.cipher"
    chosen.write_text(f"Ciphers {cipher}\n")  # how an operator picks one for specops
    pinned = sshd.profile(chosen)
    found: list[Client] = []
    short = f" ({cipher.split('@')[0]})"
    for scp_cipher, profile, suffix in ((None, default, ""), (cipher, pinned, short)):
        scp_name = f"scp{suffix}"
        negotiated = openssh_cipher(sshd, scp_cipher)
        ours = asyncio.run(asyncssh_cipher(profile))

        def scp(then: str, c: str | None = scp_cipher) -> Callable[[Path], Measured]:
            return lambda d: run_scp(sshd, src, d, c, then)

        def specops(run: Fetcher, p: Profile = profile) -> Callable[[Path], Measured]:
            return lambda d: asyncio.run(run(p, src, d))

        found.append(Client(scp_name, negotiated, scp_name, scp(""), []))
        if not suffix:
            found.append(Client("scp + fsync", negotiated, scp_name, scp("fsync"), []))
        found.append(Client(f"scp + verify{suffix}", negotiated, scp_name, scp("verify"), []))
        found.append(Client(f"specops{suffix}", ours, scp_name, specops(run_specops), []))
        found.append(Client(f"sftp only{suffix}", ours, scp_name, specops(run_sftp_only), []))
    return found


def loadavg() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


def main() -> None:
    unwind_on_signals()  # sshd killed, temporary directory removed, however the bench ends
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mb", type=int, default=1024, help="artifact set size in MiB")
    parser.add_argument("--large", type=int, default=4, help="large binary files")
    parser.add_argument("--small", type=int, default=200, help="small JSON files")
    parser.add_argument("--runs", type=int, default=3, help="runs per client (median shown)")
    parser.add_argument("--cipher", default="aes128-gcm@openssh.com", help="the second pairing")
    args = parser.parse_args()

    loads = [loadavg()]
    with tempfile.TemporaryDirectory(prefix="specops-bench-transfer-") as tmp:
        root = Path(tmp)
        (root / "sshd").mkdir()
        (root / "dest").mkdir()
        console.print(f"creating {args.mb} MiB: {args.large} large + {args.small} JSON files")
        sources = make_artifacts(root / "src", args.mb, args.large, args.small)
        total = sum(p.stat().st_size for p in sources)
        with private_sshd(root / "sshd") as sshd:
            runs = clients(sshd, root / "src", args.cipher)
            for i in range(args.runs):  # interleaved, so drift hits every client alike
                for client in runs:
                    console.print(f"  run {i + 1}/{args.runs}: {client.name} …")
                    measure(client, sshd, root / "dest", sources)
                    loads.append(loadavg())
    rows: list[dict[str, Any]] = []
    for client in runs:
        seconds = statistics.median(r["s"] for r in client.samples)
        rows.append(
            {
                "client": client.name,
                "cipher": client.cipher,
                "files": len(sources),
                "MiB": total / (1 << 20),
                "seconds": seconds,
                "MiB_per_s": total / (1 << 20) / seconds,
                "client_cpu_s": statistics.median(r["client"] for r in client.samples),
                "server_cpu_s": statistics.median(r["server"] for r in client.samples),
                "runs_s": [round(r["s"], 3) for r in client.samples],
                "loadavg_max": max(loads),
            }
        )
    by_name = {row["client"]: row for row in rows}
    for client, row in zip(runs, rows, strict=True):
        row["vs_scp"] = row["MiB_per_s"] / by_name[client.baseline]["MiB_per_s"]
    report(
        "transfer",
        f"Snapshot transfer: specops vs scp, same sshd, same {len(sources)} files "
        f"(vs_scp: against scp with the same cipher; load avg ≤ {max(loads):.1f})",
        [
            *("client", "cipher", "files", "MiB", "seconds", "MiB_per_s"),
            *("client_cpu_s", "server_cpu_s", "vs_scp"),
        ],
        rows,
    )


if __name__ == "__main__":
    main()
