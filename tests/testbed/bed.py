"""The testbed: N hosts booted together, their client key, known_hosts and profiles.

`Testbed.start()` wires and boots every host at once and waits for all of them, so a
session pays for one boot (about a second). `heal()` puts every host back to its booted
state between tests (link up, sshd and the service running the original unit, no
drop-ins); `stop()` kills only what `start()` started and checks nothing is left behind.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import asyncssh

from console.hosts.profiles import Profile, load_profile
from console.sim.fleet import HOST_NAMES, render_profile
from console.transport.ssh import host_key_line
from tests import pace
from tests.testbed import layout, netns
from tests.testbed.hosts import BootError, Host, wait_all, wait_for

HEALTHY = {"ActiveState": "active", "SubState": "running", "NRestarts": "0"}
COMMENT = "A testbed host (tests/testbed): real OpenSSH + systemd in a network namespace."


class Testbed:
    __test__ = False  # not a test class, despite its name

    def __init__(
        self, directory: Path, hosts: int = 2, *, load_s: float = 1.0, decode_s: float = 0.5
    ) -> None:
        if not 1 <= hosts <= len(HOST_NAMES):
            raise ValueError(f"a testbed has 1 to {len(HOST_NAMES)} hosts")
        self.directory = directory
        self.count = hosts
        self.load_s = load_s
        self.decode_s = decode_s
        self.hosts: list[Host] = []
        self.links: list[netns.Link] = []

    @property
    def client_key(self) -> Path:
        return self.directory / "id_ed25519"

    @property
    def known_hosts(self) -> Path:
        return self.directory / "known_hosts"

    @property
    def profiles_dir(self) -> Path:
        return self.directory / "profiles"

    @property
    def jump_profiles_dir(self) -> Path:
        return self.directory / "profiles-jump"

    def host(self, name: str) -> Host:
        return next(h for h in self.hosts if h.name == name)

    # --- lifecycle -------------------------------------------------------------------

    def start(self) -> None:
        missing = [p for p in ("/usr/sbin/sshd", "/lib/systemd/systemd") if not Path(p).exists()]
        if missing:  # fail in a second, not after a minute of waiting for a port
            raise BootError(f"testbed: {', '.join(missing)} not installed (.ci/run installs them)")
        d = self.directory
        d.mkdir(parents=True, exist_ok=True)
        keygen = ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "specops-testbed"]
        subprocess.run([*keygen, "-f", str(self.client_key)], check=True)
        client_pub = self.client_key.with_suffix(".pub").read_text()
        site = layout.sim_site_packages()
        try:
            self.links = netns.allocate(self.count)
            netns.connect(self.links)
            for name, link in zip(HOST_NAMES, self.links, strict=False):
                root = d / "hosts" / name
                layout.prepare(
                    root,
                    name=name,
                    address=link.address,
                    client_pub=client_pub,
                    load_s=self.load_s,
                    decode_s=self.decode_s,
                )
                self.hosts.append(Host(name, link, root, site))
            for host in self.hosts:
                host.boot()
            wait_all(self.hosts)
        except BaseException:
            self.stop()
            raise
        self._write_profiles()

    def _write_profiles(self) -> None:
        lines = []
        for host in self.hosts:
            key = asyncssh.read_public_key(str(host.directory / "etc-ssh/ssh_host_ed25519_key.pub"))
            lines.append(host_key_line(host.address, 22, key))
        self.known_hosts.write_text("".join(lines))
        (self.directory / "ssh_config").touch()
        self.profiles_dir.mkdir(exist_ok=True)
        self.jump_profiles_dir.mkdir(exist_ok=True)
        for host in self.hosts:
            (self.profiles_dir / f"{host.name}.toml").write_text(self._profile_text(host))
        if len(self.hosts) >= 2:
            first, second = self.hosts[:2]
            name = f"{second.name}-via-{first.name}"
            text = self._profile_text(second, name, proxy_jump=f"root@{first.address}:22")
            (self.jump_profiles_dir / f"{name}.toml").write_text(text)

    def _profile_text(self, host: Host, name: str = "", proxy_jump: str | None = None) -> str:
        text = render_profile(
            comment=COMMENT,
            name=name or host.name,
            host=host.address,
            port=22,
            key=self.client_key,
            known_hosts=self.known_hosts,
            ssh_config=self.directory / "ssh_config",
            keepalive=1.0,
            ready_timeout=60.0,
            soak=3.0,
            package=self.directory / "package",
            proxy_jump=proxy_jump,
        )
        # A handshake with a real sshd on a starved core took over the 5 s of the template
        # (a one-core CI run's snapshot found its host "unreachable"): scaled like every bound.
        timeout = f"connect_timeout_s = {pace.bound(5):g}"
        return text.replace("connect_timeout_s = 5\n", timeout + "\n", 1)

    def stop(self) -> None:
        """Kill every host (by its init's PID), delete the links; raise if anything is left."""
        errors = []
        for host in self.hosts:
            try:
                host.shutdown()
            except Exception as exc:  # keep tearing down the others
                errors.append(f"{host.name}: {exc}")
        netns.release(self.links)
        left = netns.leftovers(self.links) + [
            f"cgroup {h.cgroup}" for h in self.hosts if h.cgroup.exists()
        ]
        self.hosts, self.links = [], []
        if errors or left:
            raise RuntimeError(f"testbed teardown incomplete: {errors + left}")

    # --- between tests -----------------------------------------------------------------

    def heal(self) -> None:
        """Every host back to its booted state: link up, sshd up, original unit healthy."""
        for host in self.hosts:
            if host.process is None or host.process.poll() is not None:
                host.boot()
                host.wait_booted()
            host.link_up()
            host.run("systemctl", "stop", layout.SEQ_UNIT, check=False)
            history = host.directory / "var-lib-specops"  # what the console recorded there
            for entry in history.iterdir() if history.is_dir() else ():
                shutil.rmtree(entry)
            dropins = host.directory / "etc-systemd" / "system" / f"{layout.UNIT}.d"
            reload = dropins.exists()
            if reload:
                shutil.rmtree(dropins)
                host.run("systemctl", "daemon-reload")
            state = host.show(layout.UNIT, "ActiveState", "SubState", "NRestarts")
            if reload or state != HEALTHY:
                host.run("systemctl", "reset-failed", layout.UNIT, check=False)
                host.run("systemctl", "restart", layout.UNIT)
            if not host.sshd_answers():
                host.run("systemctl", "reset-failed", "ssh.service", check=False)
                host.run("systemctl", "restart", "ssh.service", check=False)
                wait_for(host.sshd_answers, 30, f"{host.name}: sshd does not answer")

    # --- profiles ----------------------------------------------------------------------

    def profile(self, name: str, **ssh: object) -> Profile:
        """The host's profile; `ssh` overrides [ssh] fields (e.g. keepalive_interval_s)."""
        profile = load_profile(self.profiles_dir / f"{name}.toml")
        if ssh:
            profile = profile.model_copy(update={"ssh": profile.ssh.model_copy(update=ssh)})
        return profile

    def jump_profile(self) -> Profile:
        (path,) = self.jump_profiles_dir.glob("*.toml")
        return load_profile(path)
