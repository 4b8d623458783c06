"""One simulated GPU host: an in-process asyncssh server with journald, systemd, files, SGLang.

The server answers exactly the remote vocabulary of `console.transport.remote` (dispatching on the
argv of each exec request), serves the host's root directory over SFTP (chrooted), and
forwards TCP connections to the service port into the simulated SGLang's HTTP handler.
Fault helpers let tests abort connections (mid-line, if asked), freeze the server so only
keepalives can notice, and take the host off the network.

Past 500 lines because it answers the whole remote vocabulary, one small handler per command;
the journal, systemd, SGLang, the shell and the GPUs have modules of their own.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import json
import logging
import os
import re
import shlex
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

import asyncssh

from console.package.manifest import format_line
from console.sim import journal as jq
from console.sim import load, releases
from console.sim.gpus import Load, Phase, UnknownField, answer
from console.sim.http import serve_http
from console.sim.journal import SimJournal
from console.sim.sglang import Timing, help_text, seed_bench_files
from console.sim.shell import sh
from console.sim.systemd import SimUnit
from console.transport import remote

log = logging.getLogger(__name__)

Handler = Callable[["SimHost", asyncssh.SSHServerProcess[str], list[str]], Awaitable[int]]


def unit_file(
    unit: str,
    python: str,
    port: int,
    budget: int = 8,
    environment: Mapping[str, str] | None = None,
) -> str:
    """The service's unit file; `environment` adds Environment= lines (plain values only)."""
    extra = "".join(f"Environment={k}={v}\n" for k, v in (environment or {}).items())
    return f"""[Unit]
Description=SGLang Kimi-K2.6 with DDTree speculative decoding
After=network-online.target

[Service]
Type=simple
Environment=PYTHONUNBUFFERED=1
Environment=SGLANG_DDTREE_MAX_TOPK=4
{extra}ExecStart={python} -m sglang.launch_server --model-path /models/Kimi-K2.6 --tp 8 \\
    --host 127.0.0.1 --port {port} --trust-remote-code --enable-metrics \\
    --speculative-algorithm DFLASH --speculative-draft-model-path /models/k26-dflash-b16 \\
    --speculative-dflash-enable-ddtree --speculative-num-draft-tokens {budget} \\
    --max-running-requests 32 --speculative-draft-window-size 4096
Restart=on-failure
RestartSec=1

[Install]
WantedBy=multi-user.target
"""


class _Server(asyncssh.SSHServer):
    def __init__(self, host: SimHost) -> None:
        self._host = host
        self._conn: asyncssh.SSHServerConnection | None = None

    def connection_made(self, conn: asyncssh.SSHServerConnection) -> None:
        self._conn = conn
        self._host.connections.add(conn)
        if self._host.frozen:
            self._host.freeze()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._conn is not None:
            self._host.connections.discard(self._conn)

    def connection_requested(
        self, dest_host: str, dest_port: int, orig_host: str, orig_port: int
    ) -> Callable[[asyncssh.SSHReader[Any], asyncssh.SSHWriter[Any]], Awaitable[None]] | bool:
        if dest_host == "127.0.0.1" and dest_port in self._host.jump_ports:
            return True  # a ProxyJump hop to another simulated host: real port forwarding
        unit = self._host.unit
        server = unit.server
        if dest_host not in ("127.0.0.1", "localhost") or server is None or server.config is None:
            raise asyncssh.ChannelOpenError(asyncssh.OPEN_CONNECT_FAILED, "Connection refused")
        if server.config.args.port != dest_port:
            raise asyncssh.ChannelOpenError(asyncssh.OPEN_CONNECT_FAILED, "Connection refused")

        async def handle(reader: asyncssh.SSHReader[Any], writer: asyncssh.SSHWriter[Any]) -> None:
            await serve_http(reader, writer, server.handle_http)

        return handle


class _SFTP(asyncssh.SFTPServer):
    """The host's files over SFTP (chrooted), with the connection-kill fault of `SimHost`."""

    def __init__(self, chan: asyncssh.SSHServerChannel[bytes], host: SimHost) -> None:
        super().__init__(chan, chroot=bytes(host.root))
        self._host = host
        host.sftp_sessions += 1

    def read(self, file_obj: object, offset: int, size: int) -> bytes:
        data: bytes = super().read(file_obj, offset, size)  # type: ignore[assignment]
        host = self._host
        if host.sftp_abort_after is not None:
            host.sftp_abort_after -= len(data)
            if host.sftp_abort_after <= 0:
                host.sftp_abort_after = None
                self.connection.abort()  # the link dies mid-transfer
        return data


class SimHost:
    """A simulated host; `start()` listens on 127.0.0.1 and returns the port."""

    def __init__(
        self,
        name: str,
        root: Path,
        *,
        host_key: asyncssh.SSHKey,
        client_key: asyncssh.SSHKey,
        unit: str = "sglang-k26-ddtree.service",
        service_port: int = 30001,
        timing: Timing = Timing(),
        python: str = "/opt/sglang/venv/bin/python3",
        sglang_version: str | None = None,
    ) -> None:
        self.name = name
        self.sglang_version = sglang_version or releases.DEFAULT_RELEASE
        """What `python -c 'import sglang; print(sglang.__version__)'` answers."""
        self.root = root
        self.host_key = host_key
        self.client_key = client_key
        self.python = python
        self.journal = SimJournal()
        self.connections: set[asyncssh.SSHServerConnection] = set()
        self.frozen = False
        self._thawed = asyncio.Event()
        self._thawed.set()
        self.torn_aborts = 0
        """Pending faults: abort the connection in the middle of the next journal line."""
        self.background: set[asyncio.Task[None]] = set()
        self.jump_ports: set[int] = set()
        """SSH ports of other simulated hosts this one may forward to (ProxyJump)."""
        self.commands: list[str] = []
        """Every command received, as sent (the audit of what the console ran)."""
        self.lacks: set[str] = set()
        """Programs this host does not have (say, openssl): the shell cannot find them."""
        self.read_only: set[str] = set()
        """Remote directories on a read-only file system: writes under them fail with EROFS
        (the tests run as root, whom file modes would not stop)."""
        self.gpus: list[str] = []
        """The GPUs `nvidia-smi` lists, by name, in index order; none (the default): the host
        has no nvidia-smi, as a simulated host has no GPU."""
        self.gpu_hang = False
        """Fault: `nvidia-smi` answers nothing until it is cleared or its caller gives up (a
        GPU fallen off the bus hangs the driver's tools)."""
        self.sftp_sessions = 0
        """SFTP sessions opened so far (commands above do not show them)."""
        self.sftp_abort_after: int | None = None
        """Pending fault: abort the connection once SFTP has served this many more bytes."""
        self.port = 0
        self._acceptor: asyncssh.SSHAcceptor | None = None
        bench = root / "root" / "bench_results_opt"
        self.unit = SimUnit(
            unit, root, self.journal, timing=timing, bench_dir=bench, version=self.sglang_version
        )
        self.unit.gpus = lambda: len(self.gpus)
        frag = self.unit.local(self.unit.fragment)
        if not frag.exists():
            frag.parent.mkdir(parents=True, exist_ok=True)
            frag.write_text(unit_file(unit, python, service_port))
            seed_bench_files(bench, name)

    # --- lifecycle ---------------------------------------------------------------------

    async def start(self, port: int = 0) -> int:
        self._acceptor = await asyncssh.listen(
            "127.0.0.1",
            port or self.port,
            server_host_keys=[self.host_key],
            authorized_client_keys=asyncssh.import_authorized_keys(
                self.client_key.export_public_key().decode()
            ),
            server_factory=lambda: _Server(self),
            process_factory=self._process,
            sftp_factory=lambda chan: _SFTP(chan, self),
            allow_scp=False,
            encoding="utf-8",
            errors="replace",
        )
        self.port = self._acceptor.get_port()
        if self.unit.active_state == "inactive" and self.unit.loaded is None:
            self.unit.daemon_reload()
            self.unit._start()
        return self.port

    async def stop(self) -> None:
        await self.go_offline()
        await self.unit.shutdown()

    async def go_offline(self) -> None:
        """Stop listening and drop every connection (a host that fell off the network)."""
        if self._acceptor is not None:
            self._acceptor.close()
            await self._acceptor.wait_closed()
            self._acceptor = None
        self.abort_connections()

    async def go_online(self) -> None:
        await self.start(self.port)

    def abort_connections(self) -> None:
        for conn in list(self.connections):
            conn.abort()

    def freeze(self) -> None:
        """Stop reading from clients and hold the journal streams (a partition: nothing
        arrives either way, nothing is reset): only SSH keepalives can tell the host is gone."""
        self.frozen = True
        self._thawed.clear()
        for conn in self.connections:
            transport = getattr(conn, "_transport", None)
            if transport is not None:
                transport.pause_reading()

    def thaw(self) -> None:
        self.frozen = False
        self._thawed.set()
        for conn in self.connections:
            transport = getattr(conn, "_transport", None)
            if transport is not None:
                transport.resume_reading()

    async def wait_thawed(self) -> None:
        await self._thawed.wait()

    def host_key_line(self) -> str:
        return f"[127.0.0.1]:{self.port} {self.host_key.export_public_key().decode().strip()}\n"

    # --- local paths -------------------------------------------------------------------

    def read_only_at(self, path: str) -> bool:
        """Whether `path` (remote, absolute) is on one of the read-only file systems."""
        return any(path == d or path.startswith(d.rstrip("/") + "/") for d in self.read_only)

    def local(self, path: str) -> Path:
        """The real file behind a remote absolute path (never outside the host root)."""
        if path.startswith("~/"):
            path = "/root/" + path[2:]
        target = (self.root / path.lstrip("/")).resolve()
        if not target.is_relative_to(self.root.resolve()):
            raise PermissionError(path)
        return target

    # --- command dispatch --------------------------------------------------------------

    async def _process(self, process: asyncssh.SSHServerProcess[str]) -> None:
        command = process.command or ""
        self.commands.append(command)
        try:
            argv = shlex.split(command)
        except ValueError:
            process.stderr.write(f"sh: syntax error: {command}\n")
            process.exit(2)
            return
        if argv[:3] == ["sudo", "-n", "--"]:
            argv = argv[3:]
        elif argv[:2] == ["sudo", "-n"]:
            argv = argv[2:]
        handler = COMMANDS.get(argv[0]) if argv and argv[0] not in self.lacks else None
        if handler is None and len(argv) >= 3 and argv[1:3] == ["-m", "sglang.launch_server"]:
            handler = _launch_server
        if handler is None and len(argv) >= 3 and argv[1:3] == ["-m", "sglang.bench_serving"]:
            handler = _bench_serving
        if handler is None and argv[1:] == ["-c", remote.SGLANG_VERSION_CODE]:
            handler = _sglang_version
        if handler is None:
            process.stderr.write(f"sh: 1: {argv[0] if argv else ''}: not found\n")
            process.exit(127)
            return
        try:
            status = await handler(self, process, argv)
        except (asyncssh.Error, OSError, BrokenPipeError) as exc:
            log.debug("%s: %s ended: %s", self.name, command, exc)
            return
        except asyncio.CancelledError:
            return
        with contextlib.suppress(OSError, asyncssh.Error):
            process.exit(status)


async def _journalctl(
    host: SimHost, process: asyncssh.SSHServerProcess[str], argv: list[str]
) -> int:
    try:
        q = jq.parse_journalctl(argv)
        entries, follow_from = jq.select(host.journal, q)
    except (jq.JournalUsageError, StopIteration, ValueError) as exc:
        process.stderr.write(f"{exc}\n")
        return 1
    out = process.stdout
    batch = [host.journal.render(e, q.output, q.output_fields) for e in entries]
    if batch:
        await _write_lines(host, process, batch)
    if not q.follow:
        return 0
    seq = follow_from
    while True:
        await host.journal.wait_beyond(seq)
        fresh = list(jq.new_since(host.journal, seq, q))
        seq = host.journal.last_seq
        if fresh:
            await _write_lines(
                host, process, [host.journal.render(e, q.output, q.output_fields) for e in fresh]
            )
        if out.channel.is_closing():
            return 0


async def _write_lines(
    host: SimHost, process: asyncssh.SSHServerProcess[str], lines: list[str]
) -> None:
    await host.wait_thawed()
    if host.torn_aborts > 0:
        host.torn_aborts -= 1
        keep = max(1, len(lines) // 2)
        text = "\n".join(lines[:keep]) + "\n" + lines[keep - 1][: max(1, len(lines[keep - 1]) // 2)]
        process.stdout.write(text)
        await process.stdout.drain()
        await asyncio.sleep(0.01)
        process.channel.get_connection().abort()
        raise BrokenPipeError("fault injected: torn line")
    process.stdout.write("\n".join(lines) + "\n")
    await process.stdout.drain()


async def _systemctl(
    host: SimHost, process: asyncssh.SSHServerProcess[str], argv: list[str]
) -> int:
    args = [a for a in argv[1:] if a != "--"]
    props = [a.split("=", 1)[1] for a in args if a.startswith("--property=")]
    args = [a for a in args if not a.startswith("-")]
    if not args:
        process.stderr.write("systemctl: missing verb\n")
        return 1
    verb, names = args[0], args[1:]
    unit = host.unit
    if verb == "daemon-reload":
        unit.daemon_reload()
        return 0
    if not names or names[0] != unit.name:
        process.stderr.write(f"Unit {names[0] if names else ''} could not be found.\n")
        return 4 if verb == "show" else 5
    if verb == "show":
        values = unit.show()
        keys = props or list(values)
        process.stdout.write("".join(f"{k}={values.get(k, '')}\n" for k in keys))
        return 0
    if verb == "cat":
        process.stdout.write(unit.cat())
        return 0
    if verb == "is-active":
        process.stdout.write(unit.active_state + "\n")
        return 0 if unit.active_state == "active" else 3
    if verb in ("restart", "start"):
        if unit.need_daemon_reload() and unit.loaded is not None:
            process.stderr.write(
                f"Warning: The unit file, source configuration file or drop-ins of {unit.name} "
                "changed on disk. Run 'systemctl daemon-reload' to reload units.\n"
            )
        await unit.restart()
        return 0
    if verb == "stop":
        await unit.stop()
        return 0
    if verb == "reset-failed":
        unit.reset_failed()
        return 0
    process.stderr.write(f"Unknown command verb {verb}.\n")
    return 1


def _operands(argv: list[str]) -> list[str]:
    if "--" in argv:
        return argv[argv.index("--") + 1 :]
    return [a for a in argv[1:] if not a.startswith("-")]


_PROC = re.compile(r"/proc/(\d+)/(cmdline|environ)")


async def _cat(host: SimHost, process: asyncssh.SSHServerProcess[str], argv: list[str]) -> int:
    for path in _operands(argv):
        if (found := _PROC.fullmatch(path)) is not None:  # the unit's main process, as Linux
            running = host.unit.running if int(found[1]) == host.unit.main_pid else None
            if running is None:
                process.stderr.write(f"cat: {path}: No such file or directory\n")
                return 1
            argv_now, env = running
            items = argv_now if found[2] == "cmdline" else [f"{k}={v}" for k, v in env.items()]
            process.stdout.write("".join(f"{item}\0" for item in items))
            continue
        try:
            process.stdout.write(host.local(path).read_text())
        except OSError:
            process.stderr.write(f"cat: {path}: No such file or directory\n")
            return 1
    return 0


def _hash_each(
    host: SimHost,
    process: asyncssh.SSHServerProcess[str],
    paths: list[str],
    line: Callable[[str, str], str],
    unreadable: str,
) -> int:
    """Write `line(digest, path)` for every file, `unreadable.format(path)` for the rest."""
    status = 0
    for path in paths:
        try:
            digest = hashlib.sha256(host.local(path).read_bytes()).hexdigest()
        except OSError:
            process.stderr.write(unreadable.format(path) + "\n")
            status = 1
            continue
        process.stdout.write(line(digest, path))
    return status


async def _sha256sum(
    host: SimHost, process: asyncssh.SSHServerProcess[str], argv: list[str]
) -> int:
    unreadable = "sha256sum: {}: No such file or directory"
    return _hash_each(host, process, _operands(argv), format_line, unreadable)  # escaped


async def _openssl(host: SimHost, process: asyncssh.SSHServerProcess[str], argv: list[str]) -> int:
    """`openssl dgst -sha256 -r PATH…`, the only use the console makes of openssl."""
    if argv[1:4] != ["dgst", "-sha256", "-r"]:
        process.stderr.write(f"openssl: unsupported here: {shlex.join(argv[1:])}\n")
        return 1
    return _hash_each(  # names as given, never escaped
        host, process, argv[4:], "{} *{}\n".format, "{}: No such file or directory"
    )


async def _tee(host: SimHost, process: asyncssh.SSHServerProcess[str], argv: list[str]) -> int:
    data = await process.stdin.read()
    for path in _operands(argv):
        try:
            host.local(path).write_text(data)
        except OSError as exc:
            process.stderr.write(f"tee: {path}: {exc.strerror}\n")
            return 1
    process.stdout.write(data)
    return 0


async def _install(host: SimHost, process: asyncssh.SSHServerProcess[str], argv: list[str]) -> int:
    """`install -m MODE /dev/null PATH` only: an empty file with that mode (what specops
    sends before it fills a file with `tee`)."""
    args = argv[1:]
    if len(args) != 4 or args[0] != "-m" or args[2] != "/dev/null":
        process.stderr.write(f"install: unsupported here: {' '.join(args)}\n")
        return 1
    path = host.local(args[3])
    try:
        path.unlink(missing_ok=True)
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, int(args[1], 8)))
        path.chmod(int(args[1], 8))
    except (OSError, ValueError) as exc:
        process.stderr.write(f"install: {args[3]}: {exc}\n")
        return 1
    return 0


async def _mv(host: SimHost, process: asyncssh.SSHServerProcess[str], argv: list[str]) -> int:
    ops = _operands(argv)
    if len(ops) != 2:
        process.stderr.write("mv: missing file operand\n")
        return 1
    try:
        host.local(ops[0]).replace(host.local(ops[1]))
    except OSError as exc:
        process.stderr.write(f"mv: cannot move '{ops[0]}': {exc.strerror}\n")
        return 1
    return 0


async def _rm(host: SimHost, process: asyncssh.SSHServerProcess[str], argv: list[str]) -> int:
    for path in _operands(argv):
        target = host.local(path)
        if target.exists():
            target.unlink()
        elif "-f" not in argv:
            process.stderr.write(f"rm: cannot remove '{path}': No such file or directory\n")
            return 1
    return 0


async def _mkdir(host: SimHost, process: asyncssh.SSHServerProcess[str], argv: list[str]) -> int:
    for path in _operands(argv):
        host.local(path).mkdir(parents="-p" in argv, exist_ok="-p" in argv)
    return 0


async def _launch_server(
    host: SimHost, process: asyncssh.SSHServerProcess[str], argv: list[str]
) -> int:
    if argv[0] != host.python:
        process.stderr.write(f"sh: 1: {argv[0]}: not found\n")
        return 127
    if "--help" in argv or "-h" in argv:
        process.stdout.write(help_text(host.sglang_version))
        return 0
    process.stderr.write("refusing to start a second server from a shell\n")
    return 1


async def _bench_serving(
    host: SimHost, process: asyncssh.SSHServerProcess[str], argv: list[str]
) -> int:
    """`python3 -m sglang.bench_serving … --output-file F`: a short run against the unit's
    server, one JSONL record appended to F (as the real one appends), or the real one's
    failure when nothing serves."""
    if argv[0] != host.python:
        process.stderr.write(f"sh: 1: {argv[0]}: not found\n")
        return 127
    parser = argparse.ArgumentParser(prog="bench_serving", add_help=False, exit_on_error=False)
    parser.add_argument("--output-file")
    parser.add_argument("--max-concurrency", type=int, default=1)
    parser.add_argument("--random-input-len", type=int, default=1024)
    parser.add_argument("--random-output-len", type=int, default=1024)
    try:
        args, _ = parser.parse_known_args(argv[3:])
    except argparse.ArgumentError as exc:
        process.stderr.write(f"bench_serving: {exc}\n")
        return 2
    server = host.unit.server
    if server is None or not server.ready:
        process.stderr.write("aiohttp.client_exceptions.ClientConnectorError: Connection refused\n")
        return 1
    await asyncio.sleep(0.2)  # a (very) short benchmark
    record = server.bench_serving_record(
        args.max_concurrency, args.random_input_len, args.random_output_len
    )
    process.stdout.write(f"Output token throughput (tok/s): {record['output_throughput']}\n")
    if args.output_file:
        path = host.local(args.output_file)
        with path.open("a") as f:
            f.write(json.dumps(record) + "\n")
    return 0


async def _sglang_version(
    host: SimHost, process: asyncssh.SSHServerProcess[str], argv: list[str]
) -> int:
    if argv[0] != host.python:
        process.stderr.write(f"sh: 1: {argv[0]}: not found\n")
        return 127
    process.stdout.write(host.sglang_version + "\n")
    return 0


async def _nvidia_smi(
    host: SimHost, process: asyncssh.SSHServerProcess[str], argv: list[str]
) -> int:
    """`--query-gpu=… --format=…` as the reference H100's driver 580 answers it
    (console/sim/gpus.py); a field it does not know is refused as the real tool refuses it."""
    if not host.gpus:
        process.stderr.write("sh: 1: nvidia-smi: not found\n")
        return 127
    # Polled: a channel's closing has no event to wait on, and the fault is a plain flag.
    while host.gpu_hang and not process.channel.is_closing():  # noqa: ASYNC110
        await asyncio.sleep(0.05)
    query = next((a.partition("=")[2] for a in argv if a.startswith("--query-gpu=")), "")
    fmt = next((a.partition("=")[2] for a in argv if a.startswith("--format=")), "")
    server = host.unit.server
    phase: Phase = "idle" if server is None else "serving" if server.ready else "loading"
    try:
        load = server.gpu_load if server is not None else Load(running=0.0)
        text = answer(host.gpus, query.split(","), fmt, phase, load)
    except UnknownField as exc:
        process.stdout.write(f'Field "{exc}" is not a valid field to query.\n\n')
        return 2
    process.stdout.write(text)
    return 0


async def _emit(host: SimHost, process: asyncssh.SSHServerProcess[str], argv: list[str]) -> int:
    """Benchmark load (console.sim.load): starts emitting and returns at once."""
    try:
        args = load.parse_args(argv[1:])
    except (argparse.ArgumentError, SystemExit) as exc:
        process.stderr.write(f"specops-sim-emit: {exc}\n")
        return 2
    task = asyncio.create_task(
        load.emit(host.journal, args.unit, args.rate, args.count, args.start)
    )
    host.background.add(task)
    task.add_done_callback(host.background.discard)
    return 0


def _writes(handler: Handler) -> Handler:
    """A command that writes its path operands: refused under a read-only file system, as
    the kernel refuses it (EROFS), whoever asks."""

    async def checked(
        host: SimHost, process: asyncssh.SSHServerProcess[str], argv: list[str]
    ) -> int:
        for path in argv[1:]:
            if path.startswith("/") and path != "/dev/null" and host.read_only_at(path):
                process.stderr.write(f"{argv[0]}: {path}: Read-only file system\n")
                return 1
        return await handler(host, process, argv)

    return checked


COMMANDS: dict[str, Handler] = {
    "specops-sim-emit": _emit,
    "journalctl": _journalctl,
    "systemctl": _systemctl,
    "cat": _cat,
    "sha256sum": _sha256sum,
    "openssl": _openssl,
    "tee": _writes(_tee),
    "install": _writes(_install),
    "mv": _writes(_mv),
    "rm": _writes(_rm),
    "mkdir": _writes(_mkdir),
    "nvidia-smi": _nvidia_smi,
    "sh": sh,
}
