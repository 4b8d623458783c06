"""What every piece of the app shell shares: the fleet, the engine, and the main screen.

`Shell` is the typed base of the mixins in console/ui/ and of `SpecopsApp`: each mixin
subclasses it (so Textual collects its `@on` handlers, and mypy sees the same attributes);
`SpecopsApp.__init__` assigns them.
"""

from __future__ import annotations

import contextlib
from collections import deque
from collections.abc import AsyncIterator, Callable, Collection, Coroutine
from typing import Any, TypeVar, cast

from textual.app import App
from textual.widget import Widget

from console.fleet.fleet import Fleet
from console.hosts.events import CrashDetected, MetricsUpdated
from console.local.settings import Settings
from console.tuning.left_on import LeftOnFound, LeftOnWatch
from console.tuning.probation import ProbationGuard
from console.ui.engine import EngineThread
from console.watch.xid_reader import XidSeen
from widgets.host_table import HostTable

W = TypeVar("W", bound=Widget)
T = TypeVar("T")

NOTIFY_TIMEOUT_S = 6.0
"""How long a notification covers the journal: every crash stays listed under `A`, and a
rollout's outcome stays on its screen and in the audit log."""


class Shell(App[int]):
    """The state the app's pieces share, and how they reach the main screen's widgets."""

    settings: Settings
    fleet: Fleet
    read_only: bool
    host_names: list[str]
    engine: EngineThread
    """The fleet's own loop: sessions, followers, rollouts and snapshots run there."""
    crashes: deque[CrashDetected]
    """Every crash alert since start, for the alerts list (`A`)."""
    probation: ProbationGuard
    """Rolls back a crash during probation (console/tuning/probation.py), on the engine."""
    left_on: LeftOnWatch
    """Finds hosts a change did not finish on (console/tuning/left_on.py), on the engine."""
    left_ons: deque[LeftOnFound]
    xids: deque[XidSeen]
    """The driver's Xid errors read from the hosts' kernel logs, for the alerts list (`A`)."""
    _metrics_due: dict[str, MetricsUpdated]
    """Written by the engine's thread (engine_bridge.py), drawn by the metrics timer
    (monitoring.py)."""
    _main_widgets: dict[tuple[type[Widget], str | None], Widget]

    def main(self, kind: type[W], selector: str | None = None) -> W | None:
        """A widget of the main screen, whatever is on top of it; None once it is gone.

        `query_one` searches the active screen: with a modal open (alerts, flags, help) or
        the app shutting down, every engine event would otherwise raise `NoMatches`. Found
        widgets are remembered while mounted: a DOM query per timer tick and per event was
        a millisecond each under a flood.
        """
        key = (kind, selector)
        widget = self._main_widgets.get(key)
        if widget is not None and widget.is_attached:
            return cast(W, widget)
        if not self.screen_stack:
            return None
        for found in self.screen_stack[0].query(selector or kind):
            if isinstance(found, kind):
                self._main_widgets[key] = found
                return found
        return None

    @contextlib.asynccontextmanager
    async def holding(self, hosts: Collection[str], what: str) -> AsyncIterator[None]:
        """Keep `hosts` open while an operator action runs on them: in on-demand mode an idle
        host is opened (and waited for) first, and closes once nothing else wants it."""
        claim = await self.engine.run(self.fleet.claim(hosts, what))
        try:
            yield
        finally:
            if self.engine.running:
                self.engine.call(self.fleet.release, hosts, claim)

    async def on_hosts(
        self, hosts: Collection[str], work: Callable[[], Coroutine[Any, Any, T]], what: str
    ) -> T:
        """`work()` on the engine, with `hosts` held open meanwhile (see `holding`)."""
        async with self.holding(hosts, what):
            return await self.engine.run(work())

    def own_change(self, host: str, running: bool) -> None:
        """On the engine's thread: a change of this console began (`running`) or ended on
        `host`. Its "started" history entry is no change left unfinished (left_on), and its
        restarts are no crash loop (the host's monitor)."""
        if running:
            self.left_on.hold(host)
        else:
            self.left_on.release(host)
        if (monitor := self.fleet.monitors.get(host)) is not None:
            monitor.planned(running)

    @property
    def selected_host(self) -> str | None:
        table = self.main(HostTable)
        return table.cursor_host if table is not None else None
