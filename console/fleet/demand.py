"""Which hosts are wanted open, and why: on-demand connections for fleets that do not fit on
the screen.

With `follow = "on-demand"` a host has an SSH session only while something wants it: its row
is on screen, it is the selected host, an operator action runs on it, or it is on probation
(the crash watch needs its journal). Each of those is a *reason* the host holds; a host with
a reason is opened at once, and a host whose last reason went is closed only after
`idle_close_s`, so scrolling past a page of rows (or back again) never churns connections.
A reason that comes back before then cancels the close.

Plain bookkeeping on the engine's loop: no SSH here. `Fleet` passes what to do when a host is
to be opened or closed, and the clock (`schedule`) is injected so tests need not wait.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from console.hosts.clock import SYSTEM, Timer

SCREEN = "screen"
"""The host's row is on screen in the fleet table."""
SELECTED = "selected"
"""The host is selected (its journal, chart line and stats are shown)."""
PROBATION = "probation"
"""A kept change is on probation: a crash would be rolled back, so its journal is followed."""


Schedule = Callable[[float, Callable[[], None]], Timer]
"""Run a callback after a delay (seconds): the fleet's clock's `call_later`."""


class Demand:
    """Per-host reasons to be open, and the delayed close once a host has none left."""

    def __init__(
        self,
        hosts: Iterable[str],
        *,
        idle_close_s: float,
        on_open: Callable[[str], None],
        on_close: Callable[[str], None],
        schedule: Schedule = SYSTEM.call_later,
    ) -> None:
        self.idle_close_s = idle_close_s
        self._on_open = on_open
        self._on_close = on_close
        self._schedule = schedule
        self._reasons: dict[str, set[str]] = {h: set() for h in hosts}
        self._open: set[str] = set()
        self._closing: dict[str, Timer] = {}
        """Hosts with no reason left, and the timer that closes them."""
        self._expiry: dict[tuple[str, str], Timer] = {}
        """Reasons held for a while only (a probation's window), and the timer that drops them."""

    # --- what the console asks -----------------------------------------------------------

    def hold(self, host: str, reason: str, *, for_s: float | None = None) -> None:
        """`host` is wanted for `reason` (until `drop`, or for `for_s` seconds)."""
        timer = self._expiry.pop((host, reason), None)
        if timer is not None:
            timer.cancel()
        if for_s is not None:
            self._expiry[(host, reason)] = self._schedule(
                max(0.0, for_s), lambda: self._expired(host, reason)
            )
        self._reasons[host].add(reason)
        self._wanted(host)

    def drop(self, host: str, reason: str) -> None:
        """`reason` no longer wants `host`; with no reason left it closes after idle_close_s."""
        timer = self._expiry.pop((host, reason), None)
        if timer is not None:
            timer.cancel()
        reasons = self._reasons[host]
        if reason not in reasons:
            return
        reasons.discard(reason)
        if not reasons and host in self._open and host not in self._closing:
            self._closing[host] = self._schedule(self.idle_close_s, lambda: self._close(host))

    def holders(self, reason: str, hosts: Iterable[str]) -> None:
        """Exactly `hosts` hold `reason` now (the rows on screen, the selected host); those
        not open yet are opened in the order given (the table's, top row first)."""
        now = dict.fromkeys(hosts)
        for host, reasons in self._reasons.items():
            if reason in reasons and host not in now:
                self.drop(host, reason)
        for host in now:
            if reason not in self._reasons[host]:
                self.hold(host, reason)

    # --- what it says --------------------------------------------------------------------

    def reasons(self, host: str) -> frozenset[str]:
        return frozenset(self._reasons[host])

    def wanted(self, host: str) -> bool:
        return bool(self._reasons[host])

    def is_open(self, host: str) -> bool:
        """Opened and not closed since (a host waiting out idle_close_s is still open)."""
        return host in self._open

    @property
    def open_hosts(self) -> frozenset[str]:
        return frozenset(self._open)

    # --- timers ----------------------------------------------------------------------------

    def _wanted(self, host: str) -> None:
        timer = self._closing.pop(host, None)
        if timer is not None:
            timer.cancel()  # wanted again before it closed: it simply stays open
        if host not in self._open:
            self._open.add(host)
            self._on_open(host)

    def _expired(self, host: str, reason: str) -> None:
        self._expiry.pop((host, reason), None)
        self.drop(host, reason)

    def _close(self, host: str) -> None:
        self._closing.pop(host, None)
        if self._reasons[host] or host not in self._open:
            return
        self._open.discard(host)
        self._on_close(host)

    def stop(self) -> None:
        """Cancel every pending timer (the console is quitting)."""
        for timer in [*self._closing.values(), *self._expiry.values()]:
            timer.cancel()
        self._closing.clear()
        self._expiry.clear()
