"""What `specops tail` says on stderr while the link stalls or drops (issue 20).

A partition is silent: the journal simply stops, and the SSH session still says "connected"
until its keepalives give up (`keepalive_interval_s` × `keepalive_count_max`, 45 s by
default). So after `stall_s` without a record the link is asked a cheap question
(`systemctl is-active`); no answer within `probe_timeout_s` means the link is stalled, and
the connection is dropped so the session reconnects now instead of after the keepalives.
A quiet server that answers the probe is just quiet: nothing is said.

Every notice goes to stderr (one line each): stdout keeps the journal's own line stream, or
only JSON objects under `--json`, whatever the link does. The follower resumes after the
last record it delivered, so a reconnect skips and repeats nothing.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from console.transport.ssh import ConnState, HostSession, HostState

STALL_S = 15.0
"""Seconds without a journal record before the link is checked (and said to be stalled)."""
PROBE_TIMEOUT_S = 5.0
"""How long the link may take to answer `systemctl is-active` before it counts as stalled."""

_LOST = (ConnState.RECONNECTING, ConnState.UNREACHABLE)


class LinkNotices:
    """Watches one tail's session and its records; says when the link stalls, drops, returns."""

    def __init__(
        self,
        name: str,
        unit: str,
        say: Callable[[str], None],
        *,
        stall_s: float = STALL_S,
        probe_timeout_s: float = PROBE_TIMEOUT_S,
    ) -> None:
        self.name = name
        self.unit = unit
        self._say = say
        self.stall_s = stall_s
        self.probe_timeout_s = probe_timeout_s
        self._last_data = time.monotonic()
        self._last_notice = 0.0
        self._lost_at: float | None = None
        self._connected_once = False
        self._state: HostState | None = None

    def data(self) -> None:
        """A batch of records arrived (shown or filtered out: either way the link works)."""
        self._last_data = time.monotonic()

    def on_state(self, state: HostState) -> None:
        """The session's state callback."""
        self._state = state
        now = time.monotonic()
        if state.state is ConnState.CONNECTED:
            if self._lost_at is not None:
                self._say(
                    f"{self.name}: reconnected after {now - self._lost_at:.0f} s; the journal "
                    "resumes after the last record shown, nothing skipped or repeated"
                )
                self._last_data = now  # the stall clock starts again with the new link
                self._lost_at = None
            self._connected_once = True
        elif state.state in _LOST and self._connected_once and self._lost_at is None:
            self._lost_at = now
            self._last_notice = now
            retry = ""
            if state.retry_s is not None:  # the first back-off is under a second: not "in 0s"
                retry = f"; retry in {state.retry_s:.0f}s" if state.retry_s >= 1 else "; retrying"
            detail = f" ({state.detail}{retry})" if state.detail else ""
            self._say(f"{self.name}: link lost{detail}, reconnecting…")
        elif state.state is ConnState.HOST_KEY_REFUSED and self._connected_once:
            self._say(f"{self.name}: reconnecting refused: host key {state.detail}")

    async def watch(self, session: HostSession) -> None:
        """Run beside the follower (cancel it to stop)."""
        while True:
            quiet = time.monotonic() - max(self._last_data, self._last_notice)
            if quiet < self.stall_s:
                await asyncio.sleep(self.stall_s - quiet)
                continue
            silent = time.monotonic() - self._last_data
            if self._lost_at is not None:
                state = self._state
                why = f"{state.state.value}: {state.detail}" if state and state.detail else "down"
                self._notice(f"{self.name}: no data for {silent:.0f} s — link {why}, reconnecting…")
                continue
            if not await session.answers(self.probe_timeout_s):
                if self._lost_at is not None:  # the session noticed (and said so) meanwhile
                    continue
                silent = time.monotonic() - self._last_data
                self._lost_at = self._last_data
                self._notice(
                    f"{self.name}: no data for {silent:.0f} s — link stalled (no answer within "
                    f"{self.probe_timeout_s:g} s), reconnecting…"
                )
                session.drop_link()
            else:
                self._last_notice = time.monotonic()  # a quiet server: ask again in stall_s

    def _notice(self, text: str) -> None:
        self._last_notice = time.monotonic()
        self._say(text)
