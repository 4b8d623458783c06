"""Running a tuning campaign: each cell a verified change, then a measurement window.

The baseline (what the host runs when the campaign begins) is measured first, in place. Then
each cell of the grid (console/tuning/campaign.py) goes through the one path of every change
(console/tuning/change.py, action `sweep-cell`: diff, drop-in, restart, health, smoke, soak,
rollback on failure; history, audit, ledger), and a kept cell is measured over `measure_s`
seconds of its own invocation's decode lines. A crashed cell is a result: it was rolled back
by its change, it is recorded with its stage and signature, and the campaign goes on (cells
only further along the flag that crashed are skipped). A cell that dies during its window is
put back on the starting configuration at once, and its history entry says it crashed. The
host ends on the configuration it started on, or on the fastest cell that stayed up, itself
through a verified change (action `sweep-end`).

The record on the host is rewritten before and after every cell, so a killed console leaves
what `specops sweep --resume ID` picks up. No Textual: the front end gives the event sinks.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

from console.hosts import clock as clocks
from console.hosts.events import ChangeAction, RolloutEvent, RolloutOutcome
from console.hosts.profiles import FlagValue
from console.ledger import campaigns
from console.ledger.campaigns import Campaign, Cell, cell_text
from console.ledger.ledger import WindowStats, invocation_entries, measure
from console.service.status import read_status
from console.transport.ssh import Disconnected, HostSession, RemoteError
from console.tuning import bench_step, history
from console.tuning import campaign as grids
from console.tuning.change import ChangeOutcome, change
from console.tuning.plan import Plan, read_plan
from console.watch.signatures import crash_signature, record_signature


class LinkLost(Exception):
    """The link stayed down past a change's `reconnect_s`: the campaign stops there."""


@dataclass(frozen=True)
class SweepProgress:
    """A cell started (`cell.outcome` pending) or ended; `index` None for the baseline."""

    host: str
    campaign: str
    index: int | None
    total: int
    cell: Cell
    phase: str
    """"measuring", "benchmarking", "changing", "done", "skipped", or "ending" (back to the
    end state)."""


@dataclass(frozen=True)
class SweepFinished:
    host: str
    campaign: Campaign


SweepEvent = SweepProgress | SweepFinished


def _numbers(cell: Cell, windows: Mapping[str, WindowStats]) -> Cell:
    """The cell with its window's accept length and throughput (mean, sd, lines)."""
    accept, tps = windows.get("accept_len"), windows.get("gen_throughput")
    counted = tps or accept
    return replace(
        cell,
        accept_len=accept.mean if accept else None,
        accept_len_sd=accept.stddev if accept else None,
        tok_s=tps.mean if tps else None,
        tok_s_sd=tps.stddev if tps else None,
        n=counted.count if counted else 0,
    )


class Sweep:
    """One campaign on one host. `await run()` returns the campaign as it ended; it raises
    LinkLost when the link stayed down (the record says where it stopped)."""

    def __init__(
        self,
        session: HostSession,
        campaign: Campaign,
        *,
        on_event: Callable[[SweepEvent], None] | None = None,
        on_rollout: Callable[[RolloutEvent], None] | None = None,
        crashed: Callable[[], list[dict[str, FlagValue]]] | None = None,
    ) -> None:
        self.session = session
        self.campaign = campaign
        self.crashed = crashed or campaign.crashed
        """The crashed cells pruning goes by: this campaign's, or (`--split`) those of every
        campaign sharing the grid."""
        self.on_event = on_event or (lambda _: None)
        self.on_rollout = on_rollout
        self.stop_after_cell = False
        """Set by the front end: finish the current cell, then go to the end state."""
        self.profile = session.profile
        self.unit = self.profile.service.unit

    def stop(self) -> None:
        """The operator's stop: finish the current cell, then put the host back on the
        configuration it started on (not on the fastest cell, even with `keep` best)."""
        self.stop_after_cell = True
        self.campaign.keep = "original"

    # --- reporting ---------------------------------------------------------------------

    def _progress(self, index: int | None, cell: Cell, phase: str) -> None:
        total = len(self.campaign.cells)
        self.on_event(SweepProgress(self.session.name, self.campaign.id, index, total, cell, phase))

    async def _save(self) -> None:
        await campaigns.save(self.session, self.campaign)

    # --- running -------------------------------------------------------------------------

    async def run(self) -> Campaign:
        campaign = self.campaign
        campaign.state, campaign.owner = "running", history.operator()
        await self._save()
        try:
            if campaign.baseline is None:
                await self._baseline()
            for index, cell in enumerate(campaign.cells):
                if cell.outcome != "pending":
                    continue
                if self.stop_after_cell:
                    break
                await self._cell(index, cell)
            await self._end()
        except LinkLost:
            campaign.state = "failed"
            with contextlib.suppress(RemoteError):
                await self._save()
            raise
        self.on_event(SweepFinished(self.session.name, campaign))
        return campaign

    async def _baseline(self) -> None:
        status = await read_status(self.session)
        start = dict(self.campaign.start)
        cell = Cell(values=start, outcome="baseline", invocation=status.invocation_id or None)
        self._progress(None, cell, "measuring")
        windows = await self._measure(status.invocation_id or None, already_up=True)
        if "gen_throughput" not in windows:  # just started: give it a window to log numbers
            windows = await self._measure(status.invocation_id or None)
        baseline = await self._bench(None, _numbers(cell, windows))
        self.campaign.baseline = replace(baseline, finished_at=self.session.clock.time())
        await self._save()
        self._progress(None, self.campaign.baseline, "done")

    async def _measure(
        self, invocation: str | None, *, already_up: bool = False
    ) -> dict[str, WindowStats]:
        """The invocation's numbers over the window: a run already up is measured over its
        last `measure_s`; a new one is first given `measure_s` to log them."""
        if not already_up:
            await clocks.sleep(self.session.clock, self.campaign.measure_s)
        try:
            found = await measure(self.session, self.unit, invocation, self.campaign.measure_s)
        except RemoteError:
            return {}
        return dict(found)

    async def _cell(self, index: int, cell: Cell) -> None:
        campaign = self.campaign
        if campaign.prune:
            numeric = [n for n, s in self.profile.flags.items() if s.type in ("int", "float")]
            found = grids.beyond(cell.values, self.crashed(), numeric)
            if found is not None:
                name, crashed = found
                reason = (
                    f"skipped: beyond a crash ({name} {crashed[name]} crashed with the same "
                    "other flags)"
                )
                await self._record(index, replace(cell, outcome="skipped", reason=reason))
                self._progress(index, campaign.cells[index], "skipped")
                return
        campaign.current = index
        await self._save()
        self._progress(index, cell, "changing")
        plan = await read_plan(self.session, cell.values)
        starting = all(campaign.start.get(k) == v for k, v in cell.values.items())
        if not plan.changed and not starting:
            # The host runs this cell's flags, but no change of this campaign verified them
            # (a console killed mid-cell): back to the start first, then the cell as any other.
            back = await read_plan(self.session, campaign.start)
            if back.changed:
                await self._change(back, ChangeAction.SWEEP_END)
            plan = await read_plan(self.session, cell.values)
        if not plan.changed:  # the starting configuration: measure it in place
            status = await read_status(self.session)
            windows = await self._measure(status.invocation_id or None, already_up=True)
            done = replace(
                _numbers(cell, windows), outcome="measured", invocation=status.invocation_id
            )
            await self._record(index, await self._bench(index, done))
            self._progress(index, done, "done")
            return
        outcome = await self._change(plan, ChangeAction.SWEEP_CELL)
        result = outcome.result
        done = replace(
            cell,
            reason=result.reason,
            signature=result.signature,
            stage=result.stage,
            history_entry=result.history_entry,
        )
        if result.ok:
            self._progress(index, replace(done, invocation=result.invocation_id), "measuring")
            done = await self._measured(index, done, result.invocation_id)
        elif result.outcome is RolloutOutcome.ROLLED_BACK:
            done = replace(done, outcome="crashed", invocation=result.failed_invocation)
        else:
            done = replace(done, outcome="failed", invocation=result.failed_invocation)
        await self._record(index, done)
        self._progress(index, done, "done")
        if done.outcome == "failed":
            self.stop_after_cell = True  # the host is not known healthy: no more cells

    async def _measured(self, index: int, cell: Cell, invocation: str) -> Cell:
        windows = await self._measure(invocation)
        numbers = await self._bench(index, _numbers(cell, windows))
        status = await read_status(self.session, with_flags=False)
        if status.invocation_id == invocation and status.active_state == "active":
            return replace(numbers, outcome="measured", invocation=invocation)
        # It died in its window or under the benchmark (after its soak): a crash all the
        # same. Back to the start at once, so no later cell's rollback takes it for the last
        # good configuration.
        during = "measurement window" + (" or the benchmark" if self.campaign.bench else "")
        reason = f"the server died during the {self.campaign.measure_s:g}s {during}"
        crashed = replace(numbers, outcome="crashed", reason=reason)
        signature = await self._signature(invocation)
        crashed = replace(crashed, stage="measure", invocation=invocation, signature=signature)
        await self._mark_crashed(cell.history_entry, reason)
        plan = await read_plan(self.session, self.campaign.start)
        if plan.changed:
            await self._change(plan, ChangeAction.SWEEP_END)
        return crashed

    async def _signature(self, invocation: str) -> str | None:
        """The crash signature in the invocation's journal (a crash in the window has no
        rollout to name it); None when none is there or the journal cannot be read."""
        lines: list[str] = []
        with contextlib.suppress(RemoteError):
            entries = await invocation_entries(self.session, self.unit, invocation)
            lines = [entry.message for entry in entries]
        # From its first crash line on, named as the live monitor names a crash record.
        first = next((i for i, line in enumerate(lines) if crash_signature(line)), None)
        return None if first is None else record_signature(lines[first:])

    async def _bench(self, index: int | None, cell: Cell) -> Cell:
        """The campaign's `--bench` command on the cell's configuration, its tok/s read back."""
        template = self.campaign.bench
        if not template:
            return cell
        self._progress(index, cell, "benchmarking")
        root = self.profile.service.state_dir
        path = bench_step.result_path(self.unit, self.campaign.id, index, root)
        try:
            found = await bench_step.run_bench(
                self.session, template, path, timeout=self.campaign.bench_timeout_s
            )
        except Disconnected as exc:
            raise LinkLost(str(exc)) from exc
        return replace(cell, bench_tok_s=found.tok_s, bench_detail=found.detail, bench_file=path)

    async def _mark_crashed(self, entry_n: int | None, reason: str) -> None:
        if entry_n is None:
            return
        with contextlib.suppress(history.HistoryError, RemoteError):
            entries = await history.load(self.session, self.unit)
            for i, entry in enumerate(entries):
                if entry.n == entry_n:
                    entries[i] = replace(
                        entry, outcome="rolled_back", reason=reason, stage="measure"
                    )
            await history.save(self.session, self.unit, entries)

    async def _change(self, plan: Plan, action: ChangeAction) -> ChangeOutcome:
        try:
            outcome = await change(
                self.session,
                plan,
                action=action,
                on_event=self.on_rollout,
                soak_s=self.campaign.soak_s,
                cause=f"campaign {self.campaign.id}",
            )
        except Disconnected as exc:
            raise LinkLost(str(exc)) from exc
        if outcome.result.unreachable:
            raise LinkLost(outcome.result.rollback_error or outcome.result.reason)
        return outcome

    async def _record(self, index: int, cell: Cell) -> None:
        self.campaign.cells[index] = replace(cell, finished_at=self.session.clock.time())
        self.campaign.current = None
        await self._save()

    async def _end(self) -> None:
        """The host to its chosen end state: where it started, or the fastest cell."""
        campaign = self.campaign
        target: dict[str, FlagValue] = dict(campaign.start)
        label = "the configuration it started on"
        if campaign.keep == "best" and (best := campaign.best()) is not None:
            target, label = dict(best.values), f"the fastest cell ({cell_text(best.values)})"
        self._progress(None, Cell(values=target), "ending")
        plan = await read_plan(self.session, target)
        if plan.changed:
            outcome = await self._change(plan, ChangeAction.SWEEP_END)
            if not outcome.ok:
                campaign.state = "failed"
                campaign.end = f"could not return to {label}: {outcome.result.summary()}"
                await self._save()
                return
        campaign.state = "finished" if not self.stop_after_cell or self._all_done() else "stopped"
        if any(c.outcome == "failed" for c in campaign.cells):
            campaign.state = "failed"
        campaign.end = f"on {label}: {cell_text(target)}"
        await self._save()

    def _all_done(self) -> bool:
        return all(c.outcome != "pending" for c in self.campaign.cells)


def new_campaign(
    session: HostSession,
    grid: dict[str, list[FlagValue]],
    start: dict[str, FlagValue],
    *,
    soak_s: float | None,
    measure_s: float,
    keep: str,
    prune: bool,
    bench: list[str] | None = None,
    bench_timeout_s: float = bench_step.BENCH_TIMEOUT_S,
) -> Campaign:
    return Campaign(
        id=campaigns.new_id(),
        host=session.name,
        unit=session.profile.service.unit,
        grid=grid,
        start=start,
        keep=keep,
        soak_s=soak_s,
        measure_s=measure_s,
        prune=prune,
        bench=bench,
        bench_timeout_s=bench_timeout_s,
        cells=[Cell(values=v) for v in grids.cells_of(grid)],
    )
