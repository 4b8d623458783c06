"""Testbed hosts: real systemd, journald and OpenSSH, one private machine per network namespace.

A host is `unshare --pid --fork --mount --uts --cgroup --mount-proc` inside its network
namespace: systemd is PID 1 of its own PID namespace, on a unified cgroup hierarchy rooted
at the host's own cgroup, with the host's directories (see `layout`) bind-mounted over
what it writes, a private /dev, and tmpfs /run and /tmp. All of it lives in mount
namespaces that die with the host, so nothing of a host is visible outside it.

Only processes this module started are ever signalled, by PID: the host's init (a SIGKILL
of a PID namespace's init takes every process of that namespace with it) and, as faults,
processes found inside that host's own PID namespace (sshd, the service).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from tests import pace
from tests.testbed import layout
from tests.testbed.netns import PREFIX, Link, set_link

BOOT = r"""
set -eu
H="$HOST_DIR"
# cgroups: a private unified hierarchy rooted at this host's own cgroup
mount -t cgroup2 -o nosuid,nodev,noexec cgroup2 /sys/fs/cgroup
mount -o remount,bind,ro /sys
mount --bind /proc/sys /proc/sys
mount -o remount,bind,ro /proc/sys
# a new boot id per boot, as after a real reboot (journalctl --list-boots, _BOOT_ID)
cat /proc/sys/kernel/random/uuid > "$H/boot_id"
mount --bind "$H/boot_id" /proc/sys/kernel/random/boot_id
# everything the host writes: its own copies (/root last: $H or the repo may be under it)
mount --bind "$H/etc-systemd" /etc/systemd
mount --bind "$H/etc-ssh" /etc/ssh
mount --bind "$H/machine-id" /etc/machine-id
mount --bind "$H/hostname" /etc/hostname
mount --bind "$H/var-log" /var/log
mount --bind "$H/var-lib-systemd" /var/lib/systemd
# (the one mount point made on the machine: an empty /var/lib/specops, hidden by the bind)
mkdir -p /var/lib/specops
mount --bind "$H/var-lib-specops" /var/lib/specops
mount --bind "$H/var-tmp" /var/tmp
# the server's Python packages: the `sglang` shim and specops's `console`, read-only
mount --bind "$H/site" "$SITE"
mount --bind "$CONSOLE_PACKAGE" "$SITE/console"
mount -o remount,bind,ro "$SITE/console"
# a private /dev: the machine's consoles, terminals and devices stay out of reach
mount -t tmpfs -o mode=755,nosuid,size=1m tmpfs /dev
cd /dev
mknod -m 666 null c 1 3
mknod -m 666 zero c 1 5
mknod -m 666 full c 1 7
mknod -m 666 random c 1 8
mknod -m 666 urandom c 1 9
mknod -m 666 tty c 5 0
mkdir -m 755 pts
mkdir -m 1777 shm
mount -t devpts -o newinstance,ptmxmode=0666,mode=0620 devpts /dev/pts
ln -s pts/ptmx ptmx
mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs /dev/shm
ln -s /proc/self/fd fd
ln -s /proc/self/fd/0 stdin
ln -s /proc/self/fd/1 stdout
ln -s /proc/self/fd/2 stderr
touch console
mount --bind "$H/console.log" /dev/console
cd /
mount --bind "$H/root" /root
mount -t tmpfs -o mode=755,nosuid,nodev tmpfs /run
mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs /tmp
exec env -i container=specops-testbed PATH=/usr/sbin:/usr/bin:/sbin:/bin \
    /lib/systemd/systemd --system
"""

LAUNCH = 'echo $$ > "$CGROUP/cgroup.procs" && exec ip netns exec "$NETNS" ' + (
    'unshare --pid --fork --mount --uts --cgroup --mount-proc --propagation private sh -c "$BOOT"'
)

HOST_ENV = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8", "SYSTEMD_COLORS": "0"}


class BootError(RuntimeError):
    """A test host did not come up (systemd, journald or sshd)."""


def wait_for(
    predicate: Callable[[], object], timeout: float, what: str, interval: float = 0.05
) -> None:
    deadline = pace.deadline(timeout)
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"testbed: {what} (not within {timeout:.0f}s)")
        time.sleep(interval)


def cgroup2_root() -> Path:
    with open("/proc/self/mountinfo") as fh:
        for line in fh:
            fields = line.split()
            fstype = fields[fields.index("-") + 1]
            if fstype == "cgroup2":
                return Path(fields[4])
    raise BootError("no cgroup2 hierarchy is mounted; the testbed needs one for systemd")


@dataclass(frozen=True)
class Proc:
    pid: int
    """In the root PID namespace (what os.kill takes)."""
    ns_pid: int
    """As the host sees it (what systemctl reports)."""
    comm: str
    argv: tuple[str, ...]


class Host:
    """One testbed host. `boot()` starts it, `shutdown()` kills it; the directory persists."""

    def __init__(self, name: str, link: Link, directory: Path, site: str) -> None:
        self.name = name
        self.link = link
        self.directory = directory
        self.site = site
        self.cgroup = cgroup2_root() / f"{PREFIX}-{link.slot}"
        self.process: subprocess.Popen[bytes] | None = None
        self.init_pid = 0
        self.boots = 0

    @property
    def address(self) -> str:
        return self.link.address

    def __repr__(self) -> str:
        return f"Host({self.name} {self.address} init={self.init_pid})"

    # --- lifecycle -------------------------------------------------------------------

    def boot(self) -> None:
        """Start systemd in the host's namespaces; returns at once (see `wait_booted`)."""
        self.cgroup.mkdir(exist_ok=True)
        env = {
            **HOST_ENV,
            "CGROUP": str(self.cgroup),
            "NETNS": self.link.netns,
            "HOST_DIR": str(self.directory),
            "SITE": self.site,
            "CONSOLE_PACKAGE": str(layout.REPO / "console"),
            "BOOT": BOOT,
        }
        with (self.directory / "boot.log").open("ab") as log:
            self.process = subprocess.Popen(
                ["sh", "-c", LAUNCH],
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # Ctrl-C of the test run reaches pytest, not the host
            )
        self.init_pid = 0
        self.boots += 1

    def _find_init(self) -> bool:
        assert self.process is not None
        if self.process.poll() is not None:
            log = (self.directory / "boot.log").read_text(errors="replace")
            raise BootError(f"{self.name}: exited {self.process.returncode} while booting:\n{log}")
        pid = self.process.pid
        try:
            children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
            if children and Path(f"/proc/{children[0]}/comm").read_text().strip() == "systemd":
                self.init_pid = int(children[0])
        except OSError:
            return False
        return self.init_pid != 0

    def wait_booted(self, timeout: float = 60.0) -> None:
        """Until systemd finished starting up with nothing failed and sshd answers."""
        wait_for(self._find_init, timeout, f"{self.name}: systemd did not start")
        state = ""

        def settled() -> bool:
            nonlocal state
            result = self.run("systemctl", "is-system-running", check=False)
            state = result.stdout.strip()
            return state in ("running", "degraded")

        wait_for(settled, timeout, f"{self.name}: boot did not finish")
        if state == "degraded":
            failed = self.run("systemctl", "--failed", "--no-legend", "--plain").stdout
            raise BootError(f"{self.name}: units failed while booting:\n{failed}")
        wait_for(self.sshd_answers, timeout, f"{self.name}: sshd does not answer")

    def sshd_answers(self) -> bool:
        try:
            with socket.create_connection((self.address, 22), timeout=2) as sock:
                return sock.recv(4).startswith(b"SSH-")
        except OSError:
            return False

    def shutdown(self) -> None:
        """Kill the host: SIGKILL of its init takes its whole PID namespace along."""
        if self.process is None:
            return
        if self.process.poll() is None:
            if not self.init_pid:  # torn down before wait_booted saw it (another host failed)
                with contextlib.suppress(BootError):
                    self._find_init()
            # Not `unshare` alone: killing it would leave its child, the namespace's init, alive.
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.init_pid or self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=30)
        self.process = None
        self.init_pid = 0
        self._remove_cgroups()

    def _remove_cgroups(self) -> None:
        if not self.cgroup.exists():
            return
        deadline = pace.deadline(10)
        while True:
            try:
                for dirpath, _dirs, _files in sorted(
                    os.walk(self.cgroup), key=lambda w: -w[0].count("/")
                ):
                    os.rmdir(dirpath)
                return
            except OSError as exc:
                if exc.errno not in (errno.EBUSY, errno.ENOTEMPTY) or time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def restart(self, *, hard: bool = False, timeout: float = 60.0) -> None:
        """Reboot the whole host (`hard`: a power cut, SIGKILL of init) and wait for it."""
        assert self.process is not None
        if hard:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.init_pid, signal.SIGKILL)
        else:
            self.run("systemctl", "reboot", check=False)
        try:
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.kill(self.init_pid, signal.SIGKILL)
            self.process.wait(timeout=30)
        self.process = None
        self.init_pid = 0
        self._remove_cgroups()
        self.boot()
        self.wait_booted(timeout)

    # --- looking inside ----------------------------------------------------------------

    def run(
        self,
        *argv: str,
        check: bool = True,
        timeout: float = 30.0,
        input: str | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """Run a command on the host directly (not over SSH): the tests' ground truth."""
        if not self.init_pid:
            raise BootError(f"{self.name} is not running")
        cmd = ["nsenter", "-t", str(self.init_pid), "-m", "-u", "-p", "-n", "-C", "--", *argv]
        result = subprocess.run(
            cmd, env=HOST_ENV, capture_output=True, text=True, timeout=timeout, input=input
        )
        if check and result.returncode != 0:
            raise RuntimeError(
                f"{self.name}: `{' '.join(argv)}` exited {result.returncode}: "
                f"{result.stderr.strip()}"
            )
        return result

    def show(self, unit: str, *props: str) -> dict[str, str]:
        args = [f"--property={p}" for p in props]
        out = self.run("systemctl", "show", *args, "--", unit).stdout
        return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)

    def journal(self, unit: str, *extra: str) -> list[dict[str, object]]:
        out = self.run("journalctl", "-u", unit, "-o", "json", "-q", "-a", "--no-pager", *extra)
        return [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]

    def http(self, path: str, port: int = layout.SERVICE_PORT) -> tuple[int, str]:
        """GET 127.0.0.1:port/path inside the host; (0, reason) when nothing listens."""
        script = (
            "import sys, urllib.request, urllib.error\n"
            "try:\n"
            "    r = urllib.request.urlopen(sys.argv[1], timeout=5)\n"
            "    print(r.status); print(r.read().decode())\n"
            "except urllib.error.HTTPError as e:\n"
            "    print(e.code); print(e.read().decode())\n"
            "except OSError as e:\n"
            "    print(0); print(e)\n"
        )
        out = self.run(layout.SIM_PYTHON, "-c", script, f"http://127.0.0.1:{port}{path}").stdout
        status, _, body = out.partition("\n")
        return int(status), body

    def wait_healthy(self, timeout: float = 60.0) -> None:
        wait_for(lambda: self.http("/health")[0] == 200, timeout, f"{self.name}: not healthy")

    def processes(self) -> list[Proc]:
        """Every process of this host's PID namespace."""
        target = os.readlink(f"/proc/{self.init_pid}/ns/pid")
        found = []
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            try:
                if os.readlink(f"/proc/{entry.name}/ns/pid") != target:
                    continue
                comm = Path(f"/proc/{entry.name}/comm").read_text().strip()
                argv = Path(f"/proc/{entry.name}/cmdline").read_bytes().split(b"\0")
                status = Path(f"/proc/{entry.name}/status").read_text()
            except OSError:
                continue  # gone meanwhile
            nspid = next(line for line in status.splitlines() if line.startswith("NSpid:"))
            found.append(
                Proc(
                    int(entry.name),
                    int(nspid.split()[-1]),
                    comm,
                    tuple(a.decode(errors="replace") for a in argv if a),
                )
            )
        return found

    def host_key_fingerprint(self) -> str:
        """What `ssh-keygen -lf` says about the host's key (SHA256:…)."""
        pub = self.directory / "etc-ssh" / "ssh_host_ed25519_key.pub"
        out = subprocess.run(
            ["ssh-keygen", "-lf", str(pub)], capture_output=True, text=True, check=True
        ).stdout
        return out.split()[1]

    # --- faults ------------------------------------------------------------------------

    def link_down(self) -> None:
        set_link(self.link, up=False)

    def link_up(self) -> None:
        set_link(self.link, up=True)

    def signal_all(self, comm: str, sig: signal.Signals) -> list[int]:
        """Send `sig` to every process of the host named `comm`; their PIDs."""
        sent = []
        for proc in self.processes():
            if proc.comm == comm:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(proc.pid, sig)
                    sent.append(proc.pid)
        return sent

    def kill_sshd(self) -> list[int]:
        """SIGKILL every sshd of the host (listener and sessions); systemd restarts it."""
        return self.signal_all("sshd", signal.SIGKILL)

    def kill_service(self, unit: str = layout.UNIT) -> Proc:
        """SIGKILL the unit's main process (systemd's Restart=on-failure takes it from there)."""
        main = int(self.show(unit, "MainPID")["MainPID"])
        if not main:
            raise RuntimeError(f"{self.name}: {unit} has no main process")
        proc = next(p for p in self.processes() if p.ns_pid == main)
        os.kill(proc.pid, signal.SIGKILL)
        return proc


def wait_all(hosts: Sequence[Host], timeout: float = 60.0) -> None:
    for host in hosts:
        host.wait_booted(timeout)
