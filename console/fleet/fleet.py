"""All hosts together: sessions, journal followers, service status, one stream of events.

Every host runs on its own tasks, so a dead or slow host never delays another one or the
UI: connecting, following and polling are all per host and never awaited together.

By default every host is connected and followed for as long as the console runs. With
`on_demand` a host is connected only while it is wanted (console/fleet/demand.py: on screen,
selected, an action on it, on probation) and closed `idle_close_s` after the last reason
went; its tasks stay, waiting for the connection, and its follower reads back on reopening
what the host logged while idle.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import logging
import random
from collections.abc import Awaitable, Callable, Collection, Iterable
from typing import TypeVar

from console.fleet.demand import PROBATION, SCREEN, SELECTED, Demand
from console.hosts import clock as clocks
from console.hosts import tasks
from console.hosts.clock import SYSTEM, Clock
from console.hosts.events import (
    CrashDetected,
    Event,
    HealthChecked,
    HostStateChanged,
    JournalBatch,
    JournalEntry,
    ServiceStatus,
)
from console.hosts.profiles import Profile
from console.local.settings import CONNECT_BUDGET, IDLE_CLOSE_S
from console.service.status import read_status
from console.transport.ssh import (
    CommandRecord,
    ConnectBudget,
    ConnState,
    Disconnected,
    HostSession,
    HostState,
    RemoteError,
)
from console.watch.dcgm import poll_dcgm
from console.watch.gpu_reader import GpuReading, poll_gpus
from console.watch.health import UNREACHABLE, probe_health
from console.watch.journal import JournalFollower
from console.watch.monitor import HostMonitor
from console.watch.poller import poll_prometheus, poll_server
from console.watch.restarts import WINDOW_S as RESTARTS_WINDOW_S
from console.watch.unit_starts import read_starts

log = logging.getLogger(__name__)

Listener = Callable[[Event], None]
T = TypeVar("T")

PRESSURE_POLL_S = 0.01
OFFSCREEN_POLL_FACTOR = 4.0
"""A host off screen has its status fallback poll this many times less often (its status
is still re-read whenever its journal says the unit changed, and on every reconnect)."""
POLL_JITTER = 0.2
"""Each fallback wait is ± this share of it: hosts that connected together do not all read
their status in the same instant every round (200 reads in a burst, the keys waiting)."""
OPEN_WAIT_S = 30.0
"""How long an action on an idle host waits for its connection before it runs anyway (and
fails as it would on a host that is down)."""


class Fleet:
    """Owns one HostSession per profile and emits `console.hosts.events` to its listeners."""

    def __init__(
        self,
        profiles: Iterable[Profile],
        *,
        follow: bool = True,
        history: int = 200,
        poll_s: float = 30.0,
        health_s: float = 5.0,
        on_command: Callable[[CommandRecord], None] | None = None,
        server_metrics_s: float = 0.0,
        prometheus_url: str | None = None,
        connect_budget: int = CONNECT_BUDGET,
        on_demand: bool = False,
        idle_close_s: float = IDLE_CLOSE_S,
        clock: Clock = SYSTEM,
    ) -> None:
        self.profiles = {p.name: p for p in profiles}
        self.clock = clock
        """What time it is for staleness, health stamps and the idle close (tests advance it)."""
        self.connect_budget = ConnectBudget(connect_budget)
        """Shared by every session: at most this many connection attempts at once."""
        self.server_metrics_s = server_metrics_s
        """Seconds between reads of each server's /metrics (0: off); with `prometheus_url`,
        between rounds of Prometheus queries for the whole fleet instead."""
        self.prometheus_url = prometheus_url
        self.follow = follow
        self.history = history
        self.poll_s = poll_s
        self.health_s = health_s
        """How often each host's `/health` is asked (0: never)."""
        self.health: dict[str, str] = {}
        self.watched: Callable[[str], bool] | None = None
        """Hosts on screen (the app's visible rows): only their health is polled, and the
        others' status fallback poll runs OFFSCREEN_POLL_FACTOR times less often; None: all.
        Tell `on_screen` too when rows come on screen: a host off screen sleeps until then."""
        self._listeners: list[Listener] = []
        self.sessions: dict[str, HostSession] = {
            name: HostSession(
                p,
                on_state=self._state_changed,
                on_command=on_command,
                budget=self.connect_budget,
                idle=on_demand,
                clock=clock,
            )
            for name, p in self.profiles.items()
        }
        self.demand: Demand | None = None
        """Which hosts are wanted open (on-demand mode); None: every host, always."""
        if on_demand:
            self.demand = Demand(
                self.profiles,
                idle_close_s=idle_close_s,
                on_open=self._open,
                on_close=self._close,
                schedule=clock.call_later,
            )
        self._claims = itertools.count(1)
        self._switching: dict[str, asyncio.Lock] = {}
        """Per host: an open and a close never interleave (a close awaits its supervisor)."""
        self._side_tasks: set[asyncio.Task[None]] = set()
        self.status: dict[str, ServiceStatus] = {}
        self.followers: dict[str, JournalFollower] = {}
        self.monitors: dict[str, HostMonitor] = {
            name: HostMonitor(p, clock=clock) for name, p in self.profiles.items()
        }
        self._tasks: list[asyncio.Task[None]] = []
        # Status is re-read when something says it changed (systemd's own journal lines for
        # the unit, a new invocation, a reconnect, an action of ours); `poll_s` is only the
        # fallback. Polling every host every few seconds costs more than everything else
        # an idle fleet does.
        self._dirty: dict[str, asyncio.Event] = {}
        self._on_screen: frozenset[str] = frozenset()
        self._health_wake: dict[str, asyncio.Event] = {}
        """Per host: set when its row comes on screen, so its `/health` is read at once."""
        self._gpu_wake: dict[str, asyncio.Event] = {}
        """Per host: set when its row comes on screen, so its GPUs are read at once."""
        self.gpus: dict[str, GpuReading] = {}
        """Each host's newest GPU reading (hosts with `[gpu] enabled = false` have none)."""
        self.on_gpus: Callable[[GpuReading], None] | None = None
        """Told each GPU reading as it comes (the TUI's GPU column and host detail)."""
        self.pressure: Callable[[], bool] | None = None
        """True while a consumer is behind: followers stop reading (SSH flow control then
        holds the lines on the host, in its journal) until it is False again. Nothing is
        dropped; the journal is late instead of the process growing without bound."""
        self.checkpoint: Callable[[], None] | None = None
        """Called before each slice of journal is decoded; may block the calling thread (the
        TUI's engine thread sleeps there while a key is being answered)."""

    def refresh_status(self, name: str) -> None:
        """Ask for the host's unit status to be read again now."""
        if name in self._dirty:
            self._dirty[name].set()

    def listen(self, listener: Listener) -> None:
        self._listeners.append(listener)

    def emit(self, event: Event) -> None:
        for listener in self._listeners:
            try:
                listener(event)
            except Exception:  # a broken listener must not stop the engine
                log.exception("event listener failed on %r", type(event).__name__)

    def _state_changed(self, state: HostState) -> None:
        if state.state is ConnState.CONNECTED:
            self.refresh_status(state.host)
        self.emit(HostStateChanged(state))

    def start(self) -> None:
        """Start every host's session and tasks; returns immediately.

        The sessions take their turns under the connect budget in profile order (the order
        of the fleet table's first rows); a host's tasks wait for its connection."""
        for name, session in self.sessions.items():
            self._dirty[name] = asyncio.Event()
            if self.demand is None:
                session.start()
            else:  # opened when wanted; the table shows it idle meanwhile
                self.emit(HostStateChanged(session.state))
            self._tasks.append(asyncio.create_task(self._poll(name), name=f"status:{name}"))
            if self.health_s > 0:
                task = asyncio.create_task(self._poll_health(name), name=f"health:{name}")
                self._tasks.append(task)
            if self.follow:
                follower = JournalFollower(
                    session,
                    session.profile.service.unit,
                    self._journal_delivery(name),
                    history=self.history,
                    gate=self._gate,
                )
                self.followers[name] = follower
                self._tasks.append(asyncio.create_task(follower.run(), name=f"journal:{name}"))
        self._start_number_polls()
        self._start_gpu_polls()

    def _start_gpu_polls(self) -> None:
        if self.prometheus_url and self.server_metrics_s > 0:
            # dcgm-exporter's series in Prometheus stand in for nvidia-smi over SSH.
            profiles = [p for p in self.profiles.values() if p.gpu.enabled]
            poll = poll_dcgm(
                self.prometheus_url, profiles, self._gpus_read, self.server_metrics_s,
                clock=self.clock,
            )  # fmt: skip
            self._tasks.append(asyncio.create_task(poll, name="gpus:prometheus"))
            return
        for name, session in self.sessions.items():
            if not session.profile.gpu.enabled:
                continue
            wake = self._gpu_wake[name] = asyncio.Event()
            poll = poll_gpus(
                session,
                self._gpus_read,
                clock=self.clock,
                shown=functools.partial(self._shown, name),
                wake=wake,
            )
            self._tasks.append(asyncio.create_task(poll, name=f"gpus:{name}"))

    def _shown(self, name: str) -> bool:
        """On screen (or no screen at all: every host counts as shown)."""
        return self.watched is None or self.watched(name)

    def _gpus_read(self, reading: GpuReading) -> None:
        self.gpus[reading.host] = reading
        if reading.problem is not None:
            log.info("%s: %s", reading.host, reading.problem)
        if self.on_gpus is not None:
            self.on_gpus(reading)

    def _start_number_polls(self) -> None:
        if self.server_metrics_s <= 0:
            return
        if self.prometheus_url:
            poll = poll_prometheus(
                self.prometheus_url, list(self.profiles.values()), self.emit, self.server_metrics_s
            )
            self._tasks.append(asyncio.create_task(poll, name="prometheus"))
            return
        for name, session in self.sessions.items():
            poll = poll_server(session, self.profiles[name], self.emit, self.server_metrics_s)
            self._tasks.append(asyncio.create_task(poll, name=f"metrics:{name}"))

    def _gate(self) -> Awaitable[None] | None:
        """The followers' gate: checked before each slice of journal is decoded."""
        if self.checkpoint is not None:
            self.checkpoint()
        if self.pressure is not None and self.pressure():
            return self._wait_for_room()
        return None

    async def _wait_for_room(self) -> None:
        # Polled: the pressure is a plain predicate of the consumer (an app draining on a
        # timer), which has no event to signal when it has caught up.
        while self.pressure is not None and self.pressure():  # noqa: ASYNC110
            await asyncio.sleep(PRESSURE_POLL_S)

    def _journal_delivery(self, name: str) -> Callable[[list[JournalEntry]], None]:
        def deliver(entries: list[JournalEntry]) -> None:
            known = self.status.get(name)
            current = known.invocation_id if known is not None else None
            if any(e.pid == "1" or (e.invocation and e.invocation != current) for e in entries):
                self.refresh_status(name)  # systemd logged about the unit, or it restarted
            follower = self.followers.get(name)
            read_back = follower is not None and follower.reading_back
            self.emit(JournalBatch(name, entries, read_back))
            live = follower is None or not follower.replaying
            monitor = self.monitors[name]
            for event in monitor.observe(entries, live=live, read_back=read_back):
                if isinstance(event, CrashDetected) and (wake := self._gpu_wake.get(name)):
                    wake.set()  # the GPUs and the driver's Xid at the crash, read now
                if isinstance(event, CrashDetected) and event.flags is None:
                    self._tasks.append(asyncio.create_task(self._crash_with_flags(event)))
                else:
                    self.emit(event)

        return deliver

    async def _crash_with_flags(self, crash: CrashDetected) -> None:
        """A crash of a run whose flags were never read: read the unit's flags now.

        Bounded, so the alert is late by a round trip at most, never by a hung host.
        """
        monitor = self.monitors[crash.host]
        try:
            async with asyncio.timeout(2.0):
                status = await read_status(self.sessions[crash.host])
        except (RemoteError, ValueError, TimeoutError) as exc:
            log.warning("%s: flags at crash time unknown: %s", crash.host, exc)
        else:
            self._remember(status)
            crash = monitor.resolve_flags(crash, status.flags)
        self.emit(crash)

    def poll_wait(self, name: str) -> float:
        """Seconds until the host's next fallback status read (sooner when it is dirty)."""
        wait = self.poll_s
        if self.watched is not None and not self.watched(name):
            wait *= OFFSCREEN_POLL_FACTOR
        return wait * random.uniform(1 - POLL_JITTER, 1 + POLL_JITTER)

    async def _poll(self, name: str) -> None:
        session = self.sessions[name]
        last_invocation: str | None = None
        looked_back = False
        while True:
            await session.wait_connected()
            try:
                status = await read_status(session, with_flags=False)
                if status.invocation_id != last_invocation:
                    status = await read_status(session, with_version=True)
                    last_invocation = status.invocation_id
                if not looked_back:
                    # The runs before the console looked count in the restarts column too.
                    unit = session.profile.service.unit
                    starts = await read_starts(session, unit, RESTARTS_WINDOW_S)
                    self.monitors[name].earlier_starts(starts)
                    looked_back = True
            except RemoteError as exc:
                if isinstance(exc, Disconnected) and self._idle(name):
                    continue  # closed on demand during the read: the unit did nothing wrong
                status = ServiceStatus(host=name, error=str(exc))
                last_invocation = None
            except ValueError as exc:  # an ExecStart we cannot parse
                status = ServiceStatus(host=name, error=f"{name}: {exc}")
            self._remember(status)
            dirty = self._dirty[name]
            await clocks.wait(self.clock, dirty, self.poll_wait(name))
            dirty.clear()
            await clocks.sleep(self.clock, 0.2)  # coalesce a burst of systemd lines into one read

    async def _poll_health(self, name: str) -> None:
        """`/health` every `health_s` while connected and on screen; an event when it changes."""
        session = self.sessions[name]
        wake = self._health_wake[name] = asyncio.Event()
        while True:
            await session.wait_connected()
            wake.clear()
            wait = self.health_s
            if self._shown(name):
                health = await probe_health(session, timeout=min(3.0, self.health_s))
                if self._idle(name):
                    continue  # closed on demand during the probe: no answer to report
                if health == UNREACHABLE and not await session.answers():
                    # A partition the keepalives take a minute to notice: the row said
                    # `connected` all that while (issue 30); a new connection starts now.
                    session.drop_link()
                if health != self.health.get(name):
                    self.health[name] = health
                    self.emit(HealthChecked(name, health, self.clock.time()))
            else:
                # Off screen nothing is asked: `on_screen` wakes the host when its row comes
                # on screen; the long timeout only bounds a wake missed. Waking every host
                # every `health_s` to find it still off screen cost 200 hosts ~0.4 % of a core.
                wait = max(self.health_s, self.poll_s)
            await clocks.wait(self.clock, wake, wait)  # or sooner: the row came on screen

    def _remember(self, status: ServiceStatus) -> None:
        previous = self.status.get(status.host)
        if status.error is None and not status.flags and previous is not None:
            status = ServiceStatus(**{**status.__dict__, "flags": previous.flags})
        if status.sglang_version is None and previous is not None and previous.sglang_version:
            # asked once per invocation; an upgrade needs a restart, which asks again
            status = ServiceStatus(**{**status.__dict__, "sglang_version": previous.sglang_version})
        self.status[status.host] = status
        self.monitors[status.host].set_status(status)
        if status != previous:
            self.emit(status)

    # --- on demand (console/fleet/demand.py) ---------------------------------------------------

    def _idle(self, name: str) -> bool:
        return self.sessions[name].state.state is ConnState.IDLE

    def on_screen(self, hosts: Collection[str]) -> None:
        """The hosts whose rows are on screen now: those that just came on screen have their
        `/health` read now, not up to `health_s` later (their last answer may be minutes old:
        it was not asked while they were off screen); on-demand mode opens them."""
        shown = frozenset(hosts)
        for name in shown - self._on_screen:
            for wakes in (self._health_wake, self._gpu_wake):
                if (wake := wakes.get(name)) is not None:
                    wake.set()
        self._on_screen = shown
        if self.demand is not None:
            self.demand.holders(SCREEN, hosts)

    def select(self, host: str | None) -> None:
        """The selected host (on-demand mode: it is opened)."""
        if self.demand is not None:
            self.demand.holders(SELECTED, () if host is None else (host,))

    def probation(self, host: str, for_s: float | None) -> None:
        """A host is on probation for `for_s` more seconds (None: not on probation); on-demand
        mode keeps it open meanwhile, so a crash is seen as it happens and rolled back."""
        if self.demand is None:
            return
        if for_s is None or for_s <= 0:
            self.demand.drop(host, PROBATION)
        else:
            self.demand.hold(host, PROBATION, for_s=for_s)

    async def claim(self, hosts: Iterable[str], what: str = "action") -> str:
        """Keep `hosts` open for an operator action until `release` (on-demand mode), and
        wait (at most OPEN_WAIT_S) for those that were idle to connect. Returns the claim."""
        claim = f"{what}#{next(self._claims)}"
        if self.demand is None:
            return claim
        names = list(hosts)
        for name in names:
            self.demand.hold(name, claim)
        try:
            await asyncio.gather(*(self.sessions[n].wait_connected(OPEN_WAIT_S) for n in names))
        except BaseException:  # cancelled while waiting: the action never ran
            self.release(names, claim)
            raise
        return claim

    def release(self, hosts: Iterable[str], claim: str) -> None:
        """The action holding `claim` is over: its hosts close when nothing else wants them."""
        if self.demand is not None:
            for name in hosts:
                self.demand.drop(name, claim)

    async def using(
        self, hosts: Collection[str], work: Callable[[], Awaitable[T]], what: str = "action"
    ) -> T:
        """`work()` with `hosts` held open (see `claim`)."""
        claim = await self.claim(hosts, what)
        try:
            return await work()
        finally:
            self.release(hosts, claim)

    def _open(self, name: str) -> None:
        self._switch(name)

    def _close(self, name: str) -> None:
        self._switch(name)

    def _switch(self, name: str) -> None:
        task = asyncio.create_task(self._apply(name), name=f"demand:{name}")
        self._side_tasks.add(task)
        task.add_done_callback(self._side_tasks.discard)

    async def _apply(self, name: str) -> None:
        """Bring the host's session in line with the demand: open, or close as idle."""
        assert self.demand is not None
        session = self.sessions[name]
        async with self._switching.setdefault(name, asyncio.Lock()):
            if self.demand.is_open(name):
                session.start()
            elif session.started:
                follower = self.followers.get(name)
                if follower is not None:
                    follower.going_idle()
                await session.close(ConnState.IDLE)

    async def stop(self) -> None:
        if self.demand is not None:
            self.demand.stop()
        for task in [*self._side_tasks]:
            await tasks.stop(task)
        for task in self._tasks:
            task.cancel()
        # A task cancelled inside asyncssh may end in asyncssh's own error (a channel opened
        # on a connection being torn down): stopping goes on, and says so in the log.
        ended = await asyncio.gather(*self._tasks, return_exceptions=True)
        for task, result in zip(self._tasks, ended, strict=True):
            if isinstance(result, Exception):
                log.warning("%s ended with %r while stopping", task.get_name(), result)
        self._tasks.clear()
        await asyncio.gather(*(s.close() for s in self.sessions.values()))
