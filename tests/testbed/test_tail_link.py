"""`specops tail` through a real partition (issue 20: "tail shows nothing while a partition
stalls it"): the host's link goes down with no reset, as in the attack run; stderr says the
link stalled and when it is back, stdout stays whole JSON records, none lost or repeated."""

from __future__ import annotations

import asyncio

import pytest

from tests.integration.test_tail_link import assert_gapless, follow_through, journal_cursors
from tests.testbed.bed import Testbed

pytestmark = pytest.mark.testbed


@pytest.mark.timeout(180)
async def test_a_partition_is_said_on_stderr_and_the_tail_resumes_whole(
    bed: Testbed, capsys: pytest.CaptureFixture[str]
) -> None:
    host = bed.hosts[0]
    profile = bed.profile(host.name)

    async def down() -> None:
        await asyncio.to_thread(host.link_down)

    async def up() -> None:
        await asyncio.to_thread(host.link_up)

    try:
        lines, said = await follow_through(
            profile, capsys, down, up, "link stalled", "no data for ", stall_s=2.0, timeout=90
        )
    finally:
        await asyncio.to_thread(host.link_up)
    assert f"{host.name}: no data for " in said and "reconnecting…" in said
    assert f"{host.name}: reconnected after " in said
    assert_gapless(lines, await journal_cursors(profile))
