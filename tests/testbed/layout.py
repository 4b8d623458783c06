"""What a testbed host's private directories hold: unit files, sshd config, host key, /root.

Each host gets fresh copies of everything it may write (bind-mounted over the real paths
when it boots, see `hosts.BOOT`), so hosts share nothing and the machine's own /etc and
/root are never touched. systemd sees a minimal system: every unit the host does not need
is masked (no udev, logind, dbus, getty, sysctl, tmpfiles, module loading: nothing that
could reach outside the host), every generator too, so boot takes well under a second.

The service runs `/usr/bin/python3 -m sglang.launch_server …` like a real host's: the
host's site-packages (a per-host directory) holds a two-line `sglang.launch_server` shim
and this repo's `console` package (mounted read-only), so the same command also answers
`--help` from any SSH shell, which is how the console checks flag names.
"""

from __future__ import annotations

import os
import secrets
import subprocess
from pathlib import Path

from console.sim.host import unit_file
from console.sim.sglang import seed_bench_files
from console.sim.sglang_process import DECODE_ENV, LOAD_ENV

UNIT = "sglang-k26-ddtree.service"
SEQ_UNIT = "specops-seq.service"
"""Logs `seq N` lines, N rising across restarts (the journal test's ground truth)."""
SERVICE_PORT = 30001
SIM_PYTHON = "/usr/bin/python3"
REPO = Path(__file__).resolve().parents[2]

UNIT_DIRS = ("/lib/systemd/system", "/usr/lib/systemd/system", "/usr/local/lib/systemd/system")
GENERATOR_DIRS = ("/lib/systemd/system-generators", "/usr/lib/systemd/system-generators")
MASKED_TYPES = (".service", ".socket", ".mount", ".automount", ".path", ".timer", ".swap")
KEEP = frozenset(
    {
        "ssh.service",
        "systemd-journald.service",
        "systemd-journald.socket",
        "systemd-journald-dev-log.socket",
        "systemd-journal-flush.service",
        "systemd-reboot.service",
        "systemd-poweroff.service",
        "systemd-halt.service",
        "systemd-exit.service",
    }
)

SSHD_CONFIG = """\
# A testbed host's sshd: key-only root login on the host's own address.
ListenAddress {address}
HostKey /etc/ssh/ssh_host_ed25519_key
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
UseDNS no
PrintMotd no
# Reap sessions of clients whose link died (orphaned `journalctl -f`).
ClientAliveInterval 5
ClientAliveCountMax 3
Subsystem sftp /usr/lib/openssh/sftp-server
"""

JOURNALD_CONF = """\
[Journal]
Storage=persistent
ReadKMsg=no
ForwardToSyslog=no
ForwardToWall=no
"""

SYSTEM_CONF = """\
[Manager]
LogTarget=journal
ShowStatus=no
DefaultTimeoutStopSec=5s
"""

SEQ_UNIT_FILE = """\
[Unit]
Description=Numbered lines for the journal follower test

[Service]
ExecStart=/bin/sh -c 'n=$$(cat /root/seq 2>/dev/null); n=$${n:-0}; while :; do \\
    n=$$((n+1)); echo $$n > /root/seq.new; mv /root/seq.new /root/seq; \\
    echo "seq $$n"; sleep 0.01; done'
Restart=on-failure
RestartSec=0.2
"""

LAUNCH_SERVER = '''\
"""Testbed stand-in for SGLang's launch_server: the simulated server as a real process."""

from console.sim.sglang_process import main

if __name__ == "__main__":
    raise SystemExit(main())
'''


def sim_site_packages() -> str:
    """The first site directory of the hosts' interpreter (where the `sglang` shim goes)."""
    out = subprocess.run(
        [SIM_PYTHON, "-c", "import site; print('\\n'.join(site.getsitepackages()))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    for path in out:
        if os.path.isdir(path):
            return path
    raise RuntimeError(f"{SIM_PYTHON} has no existing site-packages directory ({out})")


def _mask_everything_else(system: Path, generators: Path) -> None:
    for directory in UNIT_DIRS:
        if not os.path.isdir(directory):
            continue
        for name in os.listdir(directory):
            if name.endswith(MASKED_TYPES) and name not in KEEP and not name.startswith("-"):
                target = system / name
                if not target.exists() and not target.is_symlink():
                    target.symlink_to("/dev/null")
    for directory in GENERATOR_DIRS:
        if os.path.isdir(directory):
            for name in os.listdir(directory):
                target = generators / name
                if not target.is_symlink():
                    target.symlink_to("/dev/null")


def prepare(
    root: Path, *, name: str, address: str, client_pub: str, load_s: float, decode_s: float
) -> None:
    """Write a fresh host directory (see hosts.BOOT for where each part is mounted)."""
    etc = root / "etc-systemd"
    system = etc / "system"
    generators = etc / "system-generators"
    for d in (
        system / "multi-user.target.wants",
        generators,
        etc / "journald.conf.d",
        etc / "system.conf.d",
        root / "etc-ssh",
        root / "root" / ".ssh",
        root / "var-log" / "journal",
        root / "var-lib-systemd",
        root / "var-lib-specops",  # the console's history of the host (console/tuning/history)
        root / "var-tmp",
        root / "site" / "sglang",
        root / "site" / "console",  # the repo's console package is mounted here
    ):
        d.mkdir(parents=True, exist_ok=True)
    for d in (root / "root", root / "root" / ".ssh"):
        d.chmod(0o700)
    (root / "var-tmp").chmod(0o1777)

    _mask_everything_else(system, generators)
    (etc / "journald.conf.d" / "specops-testbed.conf").write_text(JOURNALD_CONF)
    (etc / "system.conf.d" / "specops-testbed.conf").write_text(SYSTEM_CONF)
    (system / "default.target").symlink_to("/lib/systemd/system/multi-user.target")
    (system / "multi-user.target.wants" / "ssh.service").symlink_to(
        "/lib/systemd/system/ssh.service"
    )
    env = {LOAD_ENV: f"{load_s:g}", DECODE_ENV: f"{decode_s:g}"}
    (system / UNIT).write_text(unit_file(UNIT, SIM_PYTHON, SERVICE_PORT, environment=env))
    (system / "multi-user.target.wants" / UNIT).symlink_to(f"/etc/systemd/system/{UNIT}")
    (system / SEQ_UNIT).write_text(SEQ_UNIT_FILE)

    ssh = root / "etc-ssh"
    (ssh / "sshd_config").write_text(SSHD_CONFIG.format(address=address))
    key = ssh / "ssh_host_ed25519_key"
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"root@{name}", "-f", str(key)],
        check=True,
    )
    auth = root / "root" / ".ssh" / "authorized_keys"
    auth.write_text(client_pub)
    auth.chmod(0o600)
    seed_bench_files(root / "root" / "bench_results_opt", name)

    site = root / "site"
    (site / "sglang" / "__init__.py").write_text('"""Testbed stand-in for SGLang."""\n')
    (site / "sglang" / "launch_server.py").write_text(LAUNCH_SERVER)

    (root / "machine-id").write_text(secrets.token_hex(16) + "\n")
    (root / "hostname").write_text(name + "\n")
    (root / "console.log").touch()
