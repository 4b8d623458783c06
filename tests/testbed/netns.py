"""Network plumbing for testbed hosts: a network namespace per host, joined to the root
namespace by a veth pair with a private /30.

Addresses come from 10.213.0.0/16, a range nothing on a CI box or laptop is likely to use;
a /30 is taken only when no address or route of the root namespace touches it, under a lock
file so two test sessions on one machine never pick the same one. Hosts reach nothing but
the root namespace and (for ProxyJump) each other: their namespaces get routes to the other
testbed hosts only, and forwarding is switched on for the testbed's own veths only.
"""

from __future__ import annotations

import contextlib
import fcntl
import ipaddress
import json
import os
import subprocess
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

POOL = ipaddress.IPv4Network("10.213.0.0/16")
LOCK = Path("/run/lock/specops-testbed.lock")
PREFIX = "sptb"  # netns, veth and cgroup names start with it
NETNS_DIR = "/run/netns"  # `ip netns add` makes it a mount point the first time
MOUNTED_BY_US = Path("/run/lock/specops-testbed.netns-mount")
"""Present while NETNS_DIR is a mount point only because a testbed made one: the last
testbed session to leave (any session on this machine) unmounts it."""


@dataclass(frozen=True)
class Link:
    """One host's wiring: `gateway` is the root namespace's end, `address` the host's."""

    slot: int
    network: ipaddress.IPv4Network

    @property
    def gateway(self) -> str:
        return str(self.network.network_address + 1)

    @property
    def address(self) -> str:
        return str(self.network.network_address + 2)

    @property
    def netns(self) -> str:
        return f"{PREFIX}-{self.slot}"

    @property
    def veth(self) -> str:
        """The root namespace's end (what link down/up acts on)."""
        return f"{PREFIX}{self.slot}h"

    @property
    def peer(self) -> str:
        return f"{PREFIX}{self.slot}n"


def ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    if check and result.returncode != 0:
        raise RuntimeError(f"`ip {' '.join(args)}` failed: {result.stderr.strip()}")
    return result


def _used_networks() -> list[ipaddress.IPv4Network]:
    used: list[ipaddress.IPv4Network] = []
    for link in json.loads(ip("-j", "-4", "addr").stdout or "[]"):
        for info in link.get("addr_info", []):
            if info.get("family") == "inet":
                address = f"{info['local']}/{info['prefixlen']}"
                used.append(ipaddress.IPv4Interface(address).network)
    for route in json.loads(ip("-j", "-4", "route", "show", "table", "all").stdout or "[]"):
        dst = route.get("dst", "default")
        if dst != "default" and route.get("type", "unicast") == "unicast":
            used.append(ipaddress.IPv4Network(dst, strict=False))
    return used


def _is_mount_point(path: str) -> bool:
    with open("/proc/self/mountinfo") as fh:
        return any(line.split()[4] == path for line in fh)


def _existing_netns() -> set[str]:
    return {line.split()[0] for line in ip("netns", "list").stdout.splitlines() if line.strip()}


@contextlib.contextmanager
def _locked() -> Iterator[None]:
    LOCK.parent.mkdir(parents=True, exist_ok=True)
    with LOCK.open("a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _create(link: Link) -> None:
    ns = link.netns
    ip("netns", "add", ns)
    try:
        ip("link", "add", link.veth, "type", "veth", "peer", "name", link.peer)
        ip("link", "set", link.peer, "netns", ns)
        ip("addr", "add", f"{link.gateway}/{link.network.prefixlen}", "dev", link.veth)
        ip("link", "set", link.veth, "up")
        ip("-n", ns, "addr", "add", f"{link.address}/{link.network.prefixlen}", "dev", link.peer)
        ip("-n", ns, "link", "set", link.peer, "up")
        ip("-n", ns, "link", "set", "lo", "up")
    except Exception:
        remove(link)
        raise


def allocate(count: int) -> list[Link]:
    """Create `count` namespaces with their veth pairs on free /30s of POOL."""
    links: list[Link] = []
    with _locked():
        if not _is_mount_point(NETNS_DIR):
            MOUNTED_BY_US.touch()
        used = _used_networks()
        names = _existing_netns()
        for slot, network in enumerate(POOL.subnets(new_prefix=30)):
            if len(links) == count:
                break
            link = Link(slot, network)
            if link.netns in names or any(network.overlaps(u) for u in used):
                continue
            try:
                _create(link)
            except Exception:
                for made in links:
                    remove(made)
                raise
            links.append(link)
    if len(links) < count:
        for made in links:
            remove(made)
        raise RuntimeError(f"no free /30 left in {POOL} for {count} testbed hosts")
    return links


def release(links: Sequence[Link]) -> None:
    """Remove the links; the last testbed out unmounts NETNS_DIR if a testbed mounted it."""
    with _locked():
        for link in links:
            remove(link)
        if MOUNTED_BY_US.exists() and not os.listdir(NETNS_DIR):
            if _is_mount_point(NETNS_DIR):
                subprocess.run(["umount", NETNS_DIR], check=False, capture_output=True)
            MOUNTED_BY_US.unlink()


def connect(links: Sequence[Link]) -> None:
    """Let the hosts reach each other (ProxyJump) through the root namespace, and no more."""
    for link in links:
        Path(f"/proc/sys/net/ipv4/conf/{link.veth}/forwarding").write_text("1\n")
        for other in links:
            if other is not link:
                ip("-n", link.netns, "route", "replace", str(other.network), "via", link.gateway)


@contextlib.contextmanager
def shaped(link: Link, rate: str = "200mbit") -> Iterator[None]:
    """What the host sends goes out at `rate` (a token bucket on its end of the veth): a
    transfer then lasts as long on a starved core as on an idle one, so a test can act while
    it runs instead of racing it."""
    tc = ["ip", "netns", "exec", link.netns, "tc", "qdisc"]
    bucket = ["root", "tbf", "rate", rate, "burst", "256kb", "latency", "200ms"]
    subprocess.run([*tc, "add", "dev", link.peer, *bucket], check=True, timeout=30)
    try:
        yield
    finally:
        subprocess.run([*tc, "del", "dev", link.peer, "root"], check=False, timeout=30)


def set_link(link: Link, up: bool) -> None:
    ip("link", "set", link.veth, "up" if up else "down")


def remove(link: Link) -> None:
    """Delete the namespace (its end of the veth goes with it) and our end, if still there."""
    ip("netns", "del", link.netns, check=False)
    if ip("link", "show", link.veth, check=False).returncode == 0:
        ip("link", "del", link.veth, check=False)


def leftovers(links: Sequence[Link]) -> list[str]:
    """What of `links` still exists (for the teardown check)."""
    found = []
    names = _existing_netns() if os.path.isdir(NETNS_DIR) else set()
    for link in links:
        if link.netns in names:
            found.append(f"netns {link.netns}")
        if os.path.exists(f"/sys/class/net/{link.veth}"):
            found.append(f"link {link.veth}")
    return found
