"""JournalFollower against real journald: every line exactly once, in order, across faults.

A small unit on the host logs `seq N` about a hundred times a second (N keeps rising across
its restarts). While it does, the test breaks things the way they break in production: the
link goes down mid-burst (only keepalives notice), sshd is SIGKILLed (the stream dies with
it), the service is restarted or SIGKILLed (systemd restarts it), the link blips, the whole
host reboots. At the end, what the follower delivered must be exactly what journald holds
for the unit since the follower started: same lines, same order, none twice.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from console.hosts.events import JournalEntry
from console.transport.ssh import ConnState, HostSession
from console.watch.journal import JournalFollower, decode_field
from tests.testbed.bed import Testbed
from tests.testbed.helpers import QUICK, connected, until
from tests.testbed.hosts import Host
from tests.testbed.layout import SEQ_UNIT

pytestmark = pytest.mark.testbed

CYCLE = ("link down", "sshd killed", "service restarted", "link blip", "service killed")
ROUNDS = 5
"""5 rounds of CYCLE plus one host reboot: 26 faults, 11 of them cut the connection."""
CUTS = ("link down", "sshd killed", "host rebooted")


def flowing(delivered: list[JournalEntry]) -> Callable[[], bool]:
    """True once a few more lines than now have been delivered (the stream is live)."""
    seen = len(delivered)
    return lambda: len(delivered) > seen + 2


async def inject(fault: str, host: Host, session: HostSession) -> None:
    if fault == "link down":
        host.link_down()
        try:  # lines keep coming on the host while nobody can read them
            await until(lambda: session.state.state is not ConnState.CONNECTED, 20, "keepalive")
            await asyncio.sleep(0.5)
        finally:
            host.link_up()
    elif fault == "sshd killed":
        assert host.kill_sshd()
    elif fault == "service restarted":
        await asyncio.to_thread(host.run, "systemctl", "restart", SEQ_UNIT)
    elif fault == "link blip":
        host.link_down()
        await asyncio.sleep(0.3)
        host.link_up()
    elif fault == "service killed":
        await asyncio.to_thread(host.kill_service, SEQ_UNIT)
    elif fault == "host rebooted":
        await asyncio.to_thread(host.restart)
        await asyncio.to_thread(host.run, "systemctl", "start", SEQ_UNIT)
    else:
        raise ValueError(fault)


@pytest.mark.timeout(300)
async def test_every_line_exactly_once_across_26_faults(bed: Testbed) -> None:
    host = bed.hosts[0]
    before = host.journal(SEQ_UNIT, "-n", "1")
    session = await connected(bed.profile(host.name, keepalive_interval_s=0.5))
    delivered: list[JournalEntry] = []
    follower = JournalFollower(session, SEQ_UNIT, delivered.extend, backoff=QUICK)
    task = asyncio.create_task(follower.run())
    faults: list[str] = []
    try:
        await until(lambda: follower.restarts >= 1, 20, "follower streaming")
        await asyncio.to_thread(host.run, "systemctl", "start", SEQ_UNIT)
        plan = [fault for _ in range(ROUNDS) for fault in CYCLE]
        plan.insert(len(plan) // 2, "host rebooted")
        for fault in plan:
            await until(flowing(delivered), 30, f"lines flowing before {fault}")
            await inject(fault, host, session)
            faults.append(fault)
        await until(lambda: follower.restarts > 1, 30, "follower resumed")
        await asyncio.to_thread(host.run, "systemctl", "stop", SEQ_UNIT)

        after = ["--after-cursor=" + str(before[-1]["__CURSOR"])] if before else []
        truth = host.journal(SEQ_UNIT, *after)
        last = truth[-1]["__CURSOR"]  # journalctl < 254 prints no __SEQNUM: cursors it is
        await until(lambda: bool(delivered) and delivered[-1].cursor == last, 60, "delivered")
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await session.close()

    lines = [line for record in delivered for line in record.lines]
    expected = [decode_field(entry.get("MESSAGE")) for entry in truth]
    assert len(faults) >= 20
    assert lines == expected  # every line once, in journald's order, none lost, none twice
    numbers = [int(line.split()[1]) for line in lines if line.startswith("seq ")]
    assert numbers == sorted(set(numbers)) and len(numbers) > 200
    assert any("Stopping specops-seq.service" in line for line in lines)  # restarts happened
    # every cut really broke the stream: the follower had to resume that many times
    assert follower.restarts > sum(fault in CUTS for fault in faults)
