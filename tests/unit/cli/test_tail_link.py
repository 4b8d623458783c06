"""`specops tail`'s notices on stderr when the link drops: the retry said as it is."""

from __future__ import annotations

import pytest

from console.cli.tail_link import LinkNotices
from console.hosts.events import ConnState, HostState


@pytest.mark.parametrize(("retry_s", "said"), [(0.4, "; retrying)"), (8.2, "; retry in 8s)")])
def test_a_lost_link_says_when_it_retries(retry_s: float, said: str) -> None:
    notices: list[str] = []
    link = LinkNotices("b300", "sglang.service", notices.append)
    link.on_state(HostState("b300", ConnState.CONNECTED))
    link.on_state(HostState("b300", ConnState.UNREACHABLE, "Connection refused", retry_s=retry_s))
    assert notices == [f"b300: link lost (Connection refused{said}, reconnecting…"]
