"""HostSession: one supervised asyncssh connection per host.

The supervisor owns the connection: it connects with a timeout, keeps SSH keepalives on,
reconnects after any loss with capped, jittered backoff, and reports every state change.
Callers never see a half-dead link: a command whose connection drops raises `Disconnected`
(asyncssh itself would return `returncode None`), and a stream never yields a torn line.
An unknown or changed host key is a hard stop until the operator runs `specops trust`.

Past 500 lines because commands, streams, SFTP and tunnels all go through the one supervised
connection and its states; the commands themselves are built in remote.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, AnyStr

import asyncssh
from asyncssh.encryption import get_default_encryption_algs

from console.hosts import clock as clocks
from console.hosts import tasks
from console.hosts.clock import SYSTEM, Clock
from console.hosts.events import ConnState as ConnState  # re-exported: the session's states
from console.hosts.events import HostState as HostState
from console.hosts.profiles import Profile, ProfileError
from console.transport.remote import Command, systemctl_is_active

log = logging.getLogger(__name__)
# asyncssh logs every command at INFO; commands may carry secrets.
logging.getLogger("asyncssh").setLevel(logging.WARNING)

STREAM_CHUNK = 4 * 1024 * 1024
"""Read everything a stream has buffered (asyncssh pauses the channel at 2 MiB), not 256 KiB.

asyncssh resumes a paused channel as soon as its buffer drops below the limit, and each
resume credits the sender a full window while packets from before are still queued: with
small reads under a flood the channel's queue grew by up to a window per read (78 MiB seen,
RSS 358 MB after 1 M lines flat out). Draining it all at once resumes from empty."""


@dataclass(frozen=True)
class CommandRecord:
    """What ran where, for the audit log. `returncode` None: the link dropped, or specops
    stopped the command itself (`stopped`: a follower closed, a read given up)."""

    host: str
    command: str
    returncode: int | None
    duration_s: float
    started: float
    stopped: bool = False


@dataclass(frozen=True)
class Result:
    command: str
    returncode: int
    stdout: str
    stderr: str
    duration_s: float


LINK_PROBE_S = 5.0
"""How long a cheap read may take before the link counts as stalled (`HostSession.answers`)."""


class RemoteError(Exception):
    def __init__(self, host: str, message: str) -> None:
        super().__init__(f"{host}: {message}")
        self.host = host


class Disconnected(RemoteError):
    """No connection, or it was lost while the command ran."""


class HostKeyRefused(Disconnected):
    def __init__(self, host: str, fingerprint: str | None, detail: str = "") -> None:
        shown = fingerprint or "unknown fingerprint"
        if detail.startswith("CHANGED"):
            super().__init__(host, f"host key {detail}; refused")
        else:
            super().__init__(host, f"host key refused ({shown}); run `specops trust {host}`")
        self.fingerprint = fingerprint


class CommandFailed(RemoteError):
    def __init__(self, host: str, result: Result) -> None:
        err = result.stderr.strip().splitlines()
        tail = f": {err[-1]}" if err else ""
        super().__init__(host, f"`{result.command}` exited {result.returncode}{tail}")
        self.result = result


@dataclass(frozen=True)
class Backoff:
    """Capped exponential backoff with equal jitter (half fixed, half random)."""

    initial_s: float = 0.5
    cap_s: float = 30.0
    factor: float = 2.0

    def delay(self, attempt: int) -> float:
        base = min(self.cap_s, self.initial_s * self.factor**attempt)
        return base / 2 + random.uniform(0, base / 2)


class ConnectBudget:
    """How many SSH connection attempts may be in flight at once, across a fleet.

    Two hundred hosts connecting together make two hundred key exchanges at once, on the
    client's CPU and on any jump host or bastion in between; with a budget they queue and
    each takes its turn (a slot is held for one attempt, at most its `connect_timeout_s`,
    never during a backoff wait). The sessions ask in the order they were started, so the
    rows on screen, started first, connect first.
    """

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"a connect budget of {limit}: must be at least 1")
        self.limit = limit
        self._slots = asyncio.Semaphore(limit)
        self.in_flight = 0
        """Attempts holding a slot now."""
        self.peak = 0
        """The most attempts ever in flight at once (diagnostics, the benchmark)."""

    @contextlib.asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        async with self._slots:
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)
            try:
                yield
            finally:
                self.in_flight -= 1


def _split_jump(spec: str) -> tuple[str | None, str, int | None]:
    user, _, hostport = spec.rpartition("@")
    host, port = hostport, None
    if hostport.startswith("["):
        host, _, rest = hostport[1:].partition("]")
        port = int(rest[1:]) if rest.startswith(":") else None
    elif hostport.count(":") == 1:
        host, _, p = hostport.partition(":")
        port = int(p)
    return user or None, host, port


def connect_options(profile: Profile) -> dict[str, Any]:
    """The one place a profile becomes asyncssh connection options."""
    ssh = profile.ssh
    opts: dict[str, Any] = {
        "connect_timeout": ssh.connect_timeout_s,
        "login_timeout": max(ssh.connect_timeout_s, 30.0),
        "keepalive_interval": ssh.keepalive_interval_s,
        "keepalive_count_max": ssh.keepalive_count_max,
        "agent_forwarding": False,
    }
    if ssh.port is not None:
        opts["port"] = ssh.port
    if ssh.user is not None:
        opts["username"] = ssh.user
    if ssh.identity_file is not None:
        opts["client_keys"] = [str(ssh.identity_file.expanduser())]
    # Always explicit: left unset, asyncssh takes ssh_config's `UserKnownHostsFile`, and
    # `none` there switches verification off. A missing file trusts nothing.
    path = known_hosts_path(profile)
    opts["known_hosts"] = str(path) if path.is_file() else asyncssh.import_known_hosts("")
    if ssh.config_file is not None:
        opts["config"] = [str(ssh.config_file.expanduser())]
    ciphers = _ciphers(profile, opts)
    if ciphers is not None:
        opts["encryption_algs"] = ciphers
    return opts


_AES_GCM = (b"aes128-gcm@openssh.com", b"aes256-gcm@openssh.com")


def _ciphers(profile: Profile, opts: dict[str, Any]) -> list[str] | None:
    """asyncssh's default ciphers with AES-GCM first; None when ssh_config names its own.

    Every journal line arrives through the cipher: asyncssh's ChaCha20-Poly1305 costs ~11 µs
    a packet whatever its size, AES-GCM (OpenSSL, with the CPU's AES instructions) ~2, and
    a follower under a flood reads packets of a few lines each.
    """
    kwargs = {k: opts[k] for k in ("port", "config") if k in opts}
    resolved = asyncssh.SSHClientConnectionOptions(
        host=profile.ssh.host, known_hosts=None, client_keys=None, **kwargs
    )
    algs = list(resolved.encryption_algs)
    if algs != get_default_encryption_algs():
        return None  # the operator's `Ciphers`
    first = [a for a in _AES_GCM if a in algs]
    return [a.decode() for a in first + [a for a in algs if a not in _AES_GCM]]


async def fetch_host_key(profile: Profile) -> asyncssh.SSHKey | None:
    """The key the host offers (no authentication), to show or enrol its fingerprint."""
    opts = connect_options(profile)
    kwargs = {k: opts[k] for k in ("port", "config") if k in opts}
    tunnel = await _open_jump(profile) if profile.ssh.proxy_jump else None
    try:
        async with asyncio.timeout(profile.ssh.connect_timeout_s):
            return await asyncssh.get_server_host_key(
                profile.ssh.host, tunnel=tunnel or (), **kwargs
            )
    finally:
        if tunnel is not None:
            tunnel.close()


async def _open_jump(profile: Profile) -> asyncssh.SSHClientConnection:
    """Connect to the jump host with the profile's own key pinning and identity.

    asyncssh's `tunnel="host"` string would use default options for the first hop,
    silently bypassing the profile's known_hosts; so the first hop is built here.
    """
    assert profile.ssh.proxy_jump is not None
    user, host, port = _split_jump(profile.ssh.proxy_jump)
    opts = connect_options(profile)
    opts.pop("port", None)
    if port is not None:
        opts["port"] = port
    if user is not None:
        opts["username"] = user
    return await asyncssh.connect(host, **opts)


def host_key_identity(profile: Profile) -> tuple[str, int]:
    """The name and port the connection looks up in known_hosts.

    That is ssh_config's `HostKeyAlias`, else its `HostName` (an alias resolved), and its
    `Port` unless the profile sets one: what `trust` must write and check.
    """
    opts = connect_options(profile)
    kwargs = {k: opts[k] for k in ("port", "config") if k in opts}
    resolved = asyncssh.SSHClientConnectionOptions(
        host=profile.ssh.host, known_hosts=None, client_keys=None, **kwargs
    )
    return resolved.host_key_alias or resolved.host, resolved.port


def pinned_keys(profile: Profile) -> list[asyncssh.SSHKey]:
    """The keys known_hosts pins for the host, matched as the connection matches them."""
    path = known_hosts_path(profile)
    if not path.is_file():
        return []
    name, port = host_key_identity(profile)
    known = asyncssh.read_known_hosts(str(path))
    return list(known.match(name, "", port if port != 22 else None)[0])


def refusal_detail(
    pinned: list[asyncssh.SSHKey], offered: asyncssh.SSHKey | None, exc: Exception
) -> str | None:
    """Why the host's key was refused (None: the failure was not about its key).

    Unknown; CHANGED, with both fingerprints; or a pin of other key types only: an RSA-only
    pin makes asyncssh offer only RSA, and sshd drops the connection before any key is seen.
    """
    seen = offered.get_fingerprint("sha256") if offered is not None else "an unreadable key"
    algorithms = {k.get_algorithm() for k in pinned}
    if not isinstance(exc, asyncssh.HostKeyNotVerifiable) and (
        offered is None or not pinned or offered.get_algorithm() in algorithms
    ):
        return None
    if not pinned:
        return "not in known_hosts"
    shown = ", ".join(sorted(f"{k.get_algorithm()} {k.get_fingerprint('sha256')}" for k in pinned))
    if offered is not None and not isinstance(exc, asyncssh.HostKeyNotVerifiable):
        return (
            f"CHANGED: known_hosts pins only {', '.join(sorted(algorithms))} keys ({shown}) "
            f"and the host offers none of that type; it offers {offered.get_algorithm()} {seen}"
        )
    return f"CHANGED: the host offers {seen}, known_hosts pins {shown}"


def host_key_line(host: str, port: int, key: asyncssh.SSHKey) -> str:
    """A known_hosts line for `host` (with the `[host]:port` form for non-22 ports)."""
    name = host if port == 22 else f"[{host}]:{port}"
    return f"{name} {key.export_public_key().decode().strip()}\n"


class HostSession:
    """One supervised connection to one host. Once started it reconnects by itself until
    `close`; a closed session can be started again (on-demand mode opens and closes hosts)."""

    def __init__(
        self,
        profile: Profile,
        *,
        on_state: Callable[[HostState], None] | None = None,
        on_command: Callable[[CommandRecord], None] | None = None,
        backoff: Backoff = Backoff(),
        budget: ConnectBudget | None = None,
        idle: bool = False,
        clock: Clock = SYSTEM,
    ) -> None:
        self.profile = profile
        self.clock = clock
        """Back-off waits, state times, and the rollouts run over this session read it."""
        self._budget = budget
        self.name = profile.name
        self._on_state = on_state
        self._on_command = on_command
        self._backoff = backoff
        self._conn: asyncssh.SSHClientConnection | None = None
        self._jump: asyncssh.SSHClientConnection | None = None
        self._task: asyncio.Task[None] | None = None
        self._connected = asyncio.Event()
        self._settled = asyncio.Event()
        first = ConnState.IDLE if idle else ConnState.CONNECTING
        self._state = HostState(self.name, first, since=clock.time())
        """IDLE until first started, when the host is only opened on demand."""
        self._wake = asyncio.Event()

    # --- lifecycle ---------------------------------------------------------------------

    @property
    def state(self) -> HostState:
        return self._state

    @property
    def started(self) -> bool:
        """Started and not closed since: the supervisor keeps (or seeks) a connection."""
        return self._task is not None

    def start(self) -> None:
        if self._task is None:
            if self._state.state is ConnState.CONNECTING:
                if self._on_state is not None:
                    self._on_state(self._state)  # the first start: tell it once
            else:  # started again after a close (or first opened on demand)
                self._settled.clear()
                self._set(ConnState.CONNECTING)
            self._task = asyncio.create_task(self._supervise(), name=f"ssh:{self.name}")

    async def close(self, state: ConnState = ConnState.CLOSED) -> None:
        """Close the connection and stop reconnecting; `state` says why (CLOSED: the console
        is done with the host; IDLE: nobody wants it now, on-demand mode)."""
        if self._task is not None:
            await tasks.stop(self._task)
            self._task = None
        await self._drop()
        self._set(state)

    def reconnect_now(self) -> None:
        """Skip the current backoff wait (after `trust`, or on operator request)."""
        self._wake.set()

    def drop_link(self) -> None:
        """Abort the current connection so the supervisor reconnects now: for a link that no
        longer answers while the keepalives have not given up yet (`specops tail`'s probe)."""
        if self._conn is not None:
            self._connected.clear()
            self._conn.abort()

    async def answers(self, timeout: float = LINK_PROBE_S) -> bool:
        """Whether the link carries a cheap read (`systemctl is-active` of the profile's unit)
        within `timeout`. A partition stalls a connection without closing it, and the
        keepalives take `keepalive_interval_s` × `keepalive_count_max` to notice; a read that
        gets no answer tells sooner (`drop_link` then makes a new connection)."""
        if self.state.state is not ConnState.CONNECTED:
            return False
        try:
            await self.run(
                systemctl_is_active(self.profile.service.unit), check=False, timeout=timeout
            )
        except RemoteError:  # Disconnected, or no answer in time
            return False
        return True

    async def wait_settled(self, timeout: float) -> HostState:
        """Wait until the first connection attempt has an outcome (or `timeout`)."""
        await clocks.wait(self.clock, self._settled, timeout)
        return self._state

    async def wait_connected(self, timeout: float | None = None) -> bool:
        """Wait for a live connection (forever when `timeout` is None)."""
        return await clocks.wait(self.clock, self._connected, timeout)

    def _set(
        self,
        state: ConnState,
        detail: str = "",
        fingerprint: str | None = None,
        retry_s: float | None = None,
    ) -> None:
        if state is not ConnState.CONNECTING and state is not ConnState.RECONNECTING:
            self._settled.set()
        if (state, detail, fingerprint, retry_s) == (
            self._state.state,
            self._state.detail,
            self._state.fingerprint,
            self._state.retry_s,
        ):
            return
        now = self.clock.time()
        self._state = HostState(self.name, state, detail, fingerprint, now, retry_s)
        log.info("%s: %s %s", self.name, state.value, detail)
        if self._on_state is not None:
            self._on_state(self._state)

    def _tried(self, exc: BaseException) -> str:
        """`Connection refused (ops@10.1.2.3:22)`: why, and the user, address and port tried."""
        ssh = self.profile.ssh
        user = f"{ssh.user}@" if ssh.user else ""
        return f"{_describe(exc)} ({user}{ssh.host}:{self.profile.ssh_port})"

    async def _connect(self) -> asyncssh.SSHClientConnection:
        if self._budget is None:
            return await self._open()
        async with self._budget.slot():
            return await self._open()

    async def _open(self) -> asyncssh.SSHClientConnection:
        opts = connect_options(self.profile)
        if self.profile.ssh.proxy_jump:
            self._jump = await _open_jump(self.profile)
            opts["tunnel"] = self._jump
        return await asyncssh.connect(self.profile.ssh.host, **opts)

    async def _supervise(self) -> None:
        attempt = 0
        ever_connected = False
        while True:
            self._set(ConnState.RECONNECTING if ever_connected else ConnState.CONNECTING)
            try:
                conn = await self._connect()
            except (
                asyncssh.HostKeyNotVerifiable,
                asyncssh.KeyExchangeFailed,
                asyncssh.ConnectionLost,
                ConnectionResetError,  # sshd finding no common host key type: lost or reset
            ) as exc:
                await self._drop()
                pinned = await asyncio.to_thread(pinned_keys, self.profile)
                offered = await self._offered_key()
                detail = refusal_detail(pinned, offered, exc)
                fingerprint = offered.get_fingerprint("sha256") if offered else None
                if detail is None:  # the host answered, then failed for another reason
                    delay = self._backoff.delay(attempt)
                    attempt += 1
                    self._set(ConnState.UNREACHABLE, self._tried(exc), retry_s=delay)
                    await self._sleep(delay)
                    continue
                self._set(ConnState.HOST_KEY_REFUSED, detail, fingerprint)
                await self._sleep(None)  # a hard stop: only `reconnect_now` retries
                continue
            except Exception as exc:  # any failure to connect: report it and retry later
                if not isinstance(exc, (OSError, asyncssh.Error, TimeoutError)):
                    log.exception("%s: unexpected error while connecting", self.name)
                await self._drop()
                delay = self._backoff.delay(attempt)
                attempt += 1
                self._set(ConnState.UNREACHABLE, self._tried(exc), retry_s=delay)
                await self._sleep(delay)
                continue
            self._conn = conn
            attempt = 0
            ever_connected = True
            self._connected.set()
            self._set(ConnState.CONNECTED)
            await conn.wait_closed()
            self._connected.clear()
            await self._drop()
            await clocks.sleep(self.clock, self._backoff.delay(0))

    async def _sleep(self, delay: float | None) -> None:
        self._wake.clear()
        await clocks.wait(self.clock, self._wake, delay)

    async def _offered_key(self) -> asyncssh.SSHKey | None:
        try:
            if self._budget is None:
                return await fetch_host_key(self.profile)
            async with self._budget.slot():  # another connection: it takes a slot too
                return await fetch_host_key(self.profile)
        except (OSError, asyncssh.Error, TimeoutError):
            return None

    async def _drop(self) -> None:
        self._connected.clear()
        for conn in (self._conn, self._jump):
            if conn is not None:
                conn.abort()
        self._conn = self._jump = None

    # --- operations --------------------------------------------------------------------

    def _require(self) -> asyncssh.SSHClientConnection:
        if self._state.state is ConnState.HOST_KEY_REFUSED:
            raise HostKeyRefused(self.name, self._state.fingerprint, self._state.detail)
        if self._conn is None or not self._connected.is_set():
            raise Disconnected(self.name, f"not connected ({self._state.state.value})")
        return self._conn

    def _audit(
        self, shell: str, returncode: int | None, started: float, *, stopped: bool = False
    ) -> None:
        if self._on_command is not None:
            duration = time.monotonic() - started
            record = CommandRecord(
                self.name, shell, returncode, duration, self.clock.time(), stopped
            )
            self._on_command(record)

    async def _spawn(
        self, command: Command, encoding: str | None = "utf-8"
    ) -> tuple[str, float, asyncssh.SSHClientProcess[Any]]:
        """Open a channel for `command`: (the exact shell string, start time, process);
        `encoding` None: the process reads bytes."""
        conn = self._require()
        shell = command.shell(self.profile.ssh.sudo)
        started = time.monotonic()
        try:
            proc = await conn.create_process(shell, encoding=encoding, errors="replace")
        except (OSError, asyncssh.Error) as exc:
            self._audit(shell, None, started)
            raise Disconnected(self.name, f"`{shell}`: {_describe(exc)}") from exc
        return shell, started, proc

    async def run(
        self, command: Command, *, timeout: float | None = 60.0, check: bool = True
    ) -> Result:
        """Run one command to completion. A dropped link raises, never "succeeds".

        `timeout` covers opening the channel too: over a stalled link the open is what hangs
        (until the keepalives give up), not the command; a channel that does not open in
        time is a link that does not answer, so that is `Disconnected`."""
        deadline = None if timeout is None else asyncio.get_running_loop().time() + timeout
        try:
            async with asyncio.timeout_at(deadline):
                shell, started, proc = await self._spawn(command)
        except TimeoutError:
            shell = command.shell(self.profile.ssh.sudo)
            raise Disconnected(self.name, f"`{shell}`: no channel within {timeout}s") from None

        def audit(returncode: int | None) -> None:
            if command.audited:  # a poll every few seconds (the GPUs) is no audit entry
                self._audit(shell, returncode, started)

        try:
            if command.stdin is not None:
                proc.stdin.write(command.stdin)
            proc.stdin.write_eof()
            async with asyncio.timeout_at(deadline):
                completed = await proc.wait()
        except TimeoutError:
            proc.kill()
            proc.close()
            audit(None)
            raise RemoteError(self.name, f"`{shell}` timed out after {timeout}s") from None
        except (OSError, asyncssh.Error) as exc:
            audit(None)
            raise Disconnected(self.name, f"`{shell}`: {_describe(exc)}") from exc
        audit(completed.returncode)
        if completed.returncode is None:
            # asyncssh returns normally with no exit status when the link drops mid-command.
            raise Disconnected(self.name, f"connection lost while running `{shell}`")
        result = Result(
            shell,
            completed.returncode,
            _text(completed.stdout),
            _text(completed.stderr),
            time.monotonic() - started,
        )
        if check and result.returncode != 0:
            raise CommandFailed(self.name, result)
        return result

    def stream(self, command: Command) -> AsyncGenerator[list[str], None]:
        """Run a long command and yield its stdout as batches of complete lines.

        Lines come without their trailing newline. A trailing fragment at EOF or at a
        disconnect is a torn write and is dropped. Ends normally when the command exits 0;
        raises `Disconnected` when the link drops and `CommandFailed` on a non-zero exit.
        """
        return self._stream(command, "")

    def stream_bytes(self, command: Command) -> AsyncGenerator[list[bytes], None]:
        """`stream`, with lines as the bytes the command wrote: for a reader that parses
        bytes (the journal follower's JSON), which then needs no decoding of the stream to
        text first (0.37 µs of a journal line's ~8)."""
        return self._stream(command, b"")

    async def _stream(self, command: Command, empty: AnyStr) -> AsyncGenerator[list[AnyStr], None]:
        shell, started, proc = await self._spawn(
            command, None if isinstance(empty, bytes) else "utf-8"
        )
        newline = b"\n" if isinstance(empty, bytes) else "\n"
        returncode: int | None = None
        stopped = False
        try:
            proc.stdin.write_eof()
            pending = empty
            while True:
                try:
                    chunk = await proc.stdout.read(STREAM_CHUNK)
                except (OSError, asyncssh.Error) as exc:
                    raise Disconnected(self.name, f"`{shell}`: {_describe(exc)}") from exc
                if not chunk:
                    break
                pending += chunk
                lines = pending.split(newline)
                pending = lines.pop()
                if lines:
                    try:
                        yield lines
                    except (GeneratorExit, asyncio.CancelledError):
                        stopped = True  # the reader closed the follower: not a lost link
                        raise
            try:
                async with asyncio.timeout(10):
                    await proc.wait_closed()
            except (OSError, asyncssh.Error, TimeoutError) as exc:
                raise Disconnected(self.name, f"`{shell}`: {_describe(exc)}") from exc
            returncode = proc.returncode
            if returncode is None:
                raise Disconnected(self.name, f"connection lost while running `{shell}`")
            if returncode != 0:
                stderr = await _drain(proc)
                raise CommandFailed(self.name, Result(shell, returncode, "", stderr, 0.0))
        except asyncio.CancelledError:
            stopped = True
            raise
        finally:
            proc.close()
            self._audit(shell, returncode, started, stopped=stopped)

    @contextlib.asynccontextmanager
    async def sftp(self) -> AsyncIterator[asyncssh.SFTPClient]:
        conn = self._require()
        try:
            client = await conn.start_sftp_client()
        except (OSError, asyncssh.Error) as exc:
            raise Disconnected(self.name, f"sftp: {_describe(exc)}") from exc
        try:
            yield client
        finally:
            client.exit()

    async def open_tcp(
        self, port: int, host: str = "127.0.0.1"
    ) -> tuple[asyncssh.SSHReader[bytes], asyncssh.SSHWriter[bytes]]:
        """A TCP connection from the host to `host:port` (the server's HTTP port)."""
        conn = self._require()
        try:
            return await conn.open_connection(host, port, encoding=None)
        except (OSError, asyncssh.Error) as exc:
            raise Disconnected(self.name, f"tcp {host}:{port}: {_describe(exc)}") from exc


def _text(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else bytes(value).decode("utf-8", "replace")


async def _drain(proc: asyncssh.SSHClientProcess[str]) -> str:
    with contextlib.suppress(OSError, asyncssh.Error, TimeoutError):
        async with asyncio.timeout(2):
            return _text(await proc.stderr.read(65536))
    return ""


def _describe(exc: BaseException) -> str:
    if isinstance(exc, TimeoutError):
        return "timed out"
    if isinstance(exc, asyncssh.PermissionDenied):
        return "authentication refused"
    if isinstance(exc, asyncssh.DisconnectError):
        return exc.reason or type(exc).__name__
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__


def check_identity(profile: Profile) -> None:
    """Refuse, before any host is contacted, an identity file the connection could not use.

    asyncssh reads it only when connecting, and a passphrase-protected or malformed key then
    failed every attempt as "unreachable" (with a traceback in the log).
    """
    if profile.ssh.identity_file is None:
        return
    path = profile.ssh.identity_file.expanduser()
    where = f"profile {profile.name}: field 'ssh.identity_file' = '{path}'"
    try:
        asyncssh.read_private_key(str(path))
    except OSError as exc:
        raise ProfileError(f"{where}: cannot read it: {exc.strerror}") from None
    except (asyncssh.KeyImportError, asyncssh.KeyEncryptionError, ValueError) as exc:
        if "passphrase" in str(exc).lower():
            raise ProfileError(
                f"{where}: the key is passphrase-protected; specops cannot ask for a "
                "passphrase (load it into ssh-agent and leave identity_file unset)"
            ) from None
        raise ProfileError(f"{where}: not a private key asyncssh can read: {exc}") from None


def known_hosts_path(profile: Profile) -> Path:
    """Where host keys are pinned, and `trust` writes: the profile's `known_hosts`, else
    ssh_config's first `UserKnownHostsFile` (never `none`: that only means the default
    here), else ~/.ssh/known_hosts. Every connection passes it explicitly."""
    if profile.ssh.known_hosts is not None:
        return profile.ssh.known_hosts.expanduser()
    config = [str(profile.ssh.config_file.expanduser())] if profile.ssh.config_file else ()
    try:
        resolved = asyncssh.SSHClientConnectionOptions(
            host=profile.ssh.host, client_keys=None, config=config
        )
    except (OSError, ValueError, asyncssh.Error):
        resolved = None  # an unreadable ssh_config: the connection reports it
    files = resolved.known_hosts if resolved is not None else None
    if isinstance(files, list) and files and isinstance(files[0], str):
        return Path(files[0]).expanduser()
    return Path.home() / ".ssh" / "known_hosts"
