"""The experiment ledger: every flag change as a record of what it did to the numbers.

A rollout answers "did it come up"; a tuning campaign asks "was it better". Each change
(`specops set`, the TUI's flag editor) leaves one experiment: the host, the flag values before
and after, the outcome (kept, or rolled back with the crash signature and phase, or the wrong
smoke answer), and the metric windows read from the journal of both invocations — the previous
configuration's last minutes and the new one's run from its first decode line on: accept
length, accept rate, generation throughput, running and queued requests, each as count, mean,
p50, p10 / p90 and standard deviation.

Each experiment is one JSON file, written once and never changed, on the host beside its
history (console/tuning/history.py): `/var/lib/specops/UNIT/experiments/<UTC start>-<id>.json`,
put there the way the history is (console/transport/host_files.py: temporary name, rename,
through `sudo -n` when the profile says so). One file per experiment, each under its own name,
so two consoles finishing changes at once both land: nothing is read, merged and written back.
Every console and every profile name that reaches the host reads the same ledger. The console
keeps a copy of what it read and wrote (`$XDG_STATE_HOME/specops/experiments/HOST/`), a cache
for when the host cannot be reached; every snapshot mirrors the host's ledger into the
package's `experiments/HOST/` (so the manifest lists it and the report can cite it).

No Textual; reads the journal through the session's fixed vocabulary (console/transport/remote.py).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import posixpath
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import Any, Protocol

from console.hosts.events import ChangeAction, JournalEntry, RolloutFinished
from console.local.files import publish_new, write_file
from console.local.settings import state_dir
from console.service.status import read_status
from console.transport import remote
from console.transport.host_files import read_json_files, replace_file, unit_state_dir
from console.transport.ssh import CommandFailed, HostSession, RemoteError
from console.watch.gpus import fullest_text
from console.watch.journal import decode_lines
from console.watch.sglang import DecodeBatch, parse_line

FORMAT = "specops-experiment/1"
EXPERIMENTS_DIR = "experiments"
SERIES = ("accept_len", "accept_rate", "gen_throughput", "running_req", "queue_req", "token_usage")
"""The decode lines' numbers each side is measured by; `token_usage` is the KV cache's share in
use (what a budget change moves, and what runs a GPU out of memory)."""
BEFORE_S = 300.0
"""How much of the previous configuration's run the "before" window holds: its last 5 minutes."""


@dataclass(frozen=True)
class WindowStats:
    """One series over one window."""

    count: int
    mean: float
    stddev: float
    """Sample standard deviation (0 for a single sample)."""
    p50: float
    p10: float
    p90: float
    min: float
    max: float

    @classmethod
    def of(cls, values: Sequence[float]) -> WindowStats | None:
        if not values:
            return None
        ordered = sorted(values)
        if len(ordered) > 1:
            deciles = statistics.quantiles(ordered, n=10, method="inclusive")
            p10, p90 = deciles[0], deciles[-1]
        else:
            p10 = p90 = ordered[0]
        return cls(
            count=len(ordered),
            mean=math.fsum(ordered) / len(ordered),
            stddev=statistics.stdev(ordered) if len(ordered) > 1 else 0.0,
            p50=statistics.median(ordered),
            p10=p10,
            p90=p90,
            min=ordered[0],
            max=ordered[-1],
        )

    @classmethod
    def from_record(cls, data: Mapping[str, Any]) -> WindowStats:
        return cls(**{k: data[k] for k in cls.__dataclass_fields__})


@dataclass(frozen=True)
class Side:
    """One configuration's invocation in an experiment, and its numbers."""

    invocation: str | None
    flags: Mapping[str, Any]
    windows: Mapping[str, WindowStats] = field(default_factory=dict)
    window: str = ""
    """What the windows cover, in words ("last 300 s of its run", "from its first decode line")."""


@dataclass(frozen=True)
class Experiment:
    host: str
    unit: str
    started: str
    """UTC ISO time the change began."""
    finished: str
    outcome: str
    """"kept", "rolled_back", "failed" (the rollout's outcome)."""
    before: Side
    after: Side
    reason: str = ""
    signature: str | None = None
    phase: str | None = None
    release: str | None = None
    """`sglang.__version__` the unit's interpreter answered when the change was planned."""
    source: str = "cli"
    """Which console part made the change: "cli" or "tui" ("probation" in records written
    before `action` was)."""
    kind: str = "change"
    """"change" (new flag values) or "rollback" (`specops rollback`, a probation rollback):
    a rollback that stayed marks the configuration it left as rolled back."""
    action: str = ""
    """What asked for it (console/hosts/events.py's ChangeAction), as the audit log and the
    host's history name it; read from `kind` and `source` in older records."""
    cause: str = ""
    """Why the change was made, when something other than the operator decided it (probation:
    the crash that made it roll back a configuration that had passed its soak)."""
    rollout: str = ""
    """The group rollout it was part of (one id on every host's record); empty for one host."""
    xids: tuple[str, ...] = ()
    """The GPU driver's Xid errors within 30 s of its crash (`Xid 31 on GPU 0 at …`)."""
    gpu_memory: str | None = None
    """The fullest GPU's memory when the new setting answered ready (`GPU 0 70.1 of 80 GiB`)."""

    @property
    def kept(self) -> bool:
        return self.outcome == "kept"

    @property
    def what(self) -> ChangeAction:
        """What asked for it (read from `kind` and `source` in records written before)."""
        try:
            return ChangeAction(self.action)
        except ValueError:  # none, or one this release does not know
            return ChangeAction.of_record(self.kind, self.source)

    def record(self) -> dict[str, Any]:
        data = asdict(self)
        data["format"] = FORMAT
        for name in ("xids", "gpu_memory"):  # absent when empty: older records hash the same
            if not data[name]:
                del data[name]
        return data

    @property
    def experiment_id(self) -> str:
        canonical = json.dumps(self.record(), sort_keys=True, default=str)
        return hashlib.sha256(canonical.encode()).hexdigest()[:12]

    def file_name(self) -> str:
        stamp = datetime.fromisoformat(self.started).astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")
        return f"{stamp}-{self.experiment_id}.json"

    @classmethod
    def from_record(cls, data: Mapping[str, Any]) -> Experiment:
        if data.get("format") != FORMAT:
            raise ValueError(f"not a {FORMAT} record")

        def side(raw: Mapping[str, Any]) -> Side:
            windows = {k: WindowStats.from_record(v) for k, v in raw.get("windows", {}).items()}
            return Side(
                raw.get("invocation"), dict(raw.get("flags", {})), windows, raw.get("window", "")
            )

        names = {k for k in cls.__dataclass_fields__ if k not in ("before", "after")}
        kept = {k: v for k, v in data.items() if k in names}
        kept["xids"] = tuple(str(x) for x in kept.get("xids") or ())
        return cls(before=side(data["before"]), after=side(data["after"]), **kept)


# --- measuring -----------------------------------------------------------------------------


def samples(entries: Iterable[JournalEntry]) -> dict[str, list[tuple[float, float]]]:
    """(timestamp, value) of every series in these journal records' decode lines."""
    found: dict[str, list[tuple[float, float]]] = {name: [] for name in SERIES}
    for entry in entries:
        parsed = parse_line(entry.message)
        if not isinstance(parsed, DecodeBatch):
            continue
        for name in SERIES:
            value = getattr(parsed, name, None)
            if isinstance(value, int | float) and math.isfinite(value):
                found[name].append((entry.timestamp, float(value)))
    return found


def windows(
    series: Mapping[str, Sequence[tuple[float, float]]], last_s: float | None = None
) -> dict[str, WindowStats]:
    """Statistics of each series; with `last_s`, only its final `last_s` seconds."""
    result: dict[str, WindowStats] = {}
    for name, points in series.items():
        if not points:
            continue
        cutoff = points[-1][0] - last_s if last_s is not None else -math.inf
        stats = WindowStats.of([v for ts, v in points if ts >= cutoff])
        if stats is not None:
            result[name] = stats
    return result


async def invocation_entries(
    session: HostSession, unit: str, invocation: str
) -> list[JournalEntry]:
    """The journal records of one invocation (empty when journald no longer has them)."""
    command = remote.journal_read(unit, invocation=invocation, fields=("MESSAGE",))
    result = await session.run(command, check=False, timeout=300)
    if result.returncode not in (0, 1) or (result.returncode == 1 and result.stderr.strip()):
        raise CommandFailed(session.name, result)
    return decode_lines(session.name, result.stdout.splitlines())


async def measure(
    session: HostSession, unit: str, invocation: str | None, last_s: float | None = None
) -> dict[str, WindowStats]:
    """The windows of one invocation, read from its journal now."""
    if not invocation:
        return {}
    return windows(samples(await invocation_entries(session, unit, invocation)), last_s)


def utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


# --- storing -------------------------------------------------------------------------------


def text_of(experiment: Experiment) -> str:
    """The file's text, the same bytes wherever it is written (host, cache, package)."""
    return json.dumps(experiment.record(), indent=2, sort_keys=True) + "\n"


def parse(text: str) -> Experiment:
    """One experiment file's text (ValueError, KeyError or TypeError when it is none)."""
    return Experiment.from_record(json.loads(text))


def host_dir(unit: str, root: str) -> str:
    """Where the host keeps the unit's experiments: `ROOT/UNIT/experiments`, ROOT the
    profile's `service.state_dir` (`/var/lib/specops`)."""
    return posixpath.join(unit_state_dir(unit, root), EXPERIMENTS_DIR)


def cache_dir(host: str) -> Path:
    """The console's copy of the ledger of the host it calls `host`."""
    return state_dir() / EXPERIMENTS_DIR / host


async def save_on_host(session: HostSession, experiment: Experiment) -> str:
    """Write the experiment into the host's ledger; its path there."""
    root = session.profile.service.state_dir
    path = posixpath.join(host_dir(experiment.unit, root), experiment.file_name())
    return await replace_file(session, path, text_of(experiment))


async def load_from_host(session: HostSession) -> list[tuple[str, Experiment]]:
    """(path on the host, experiment) of the host's ledger, oldest first, and copied into the
    console's cache; files that are no experiment are skipped."""
    service = session.profile.service
    directory = host_dir(service.unit, service.state_dir)
    found: list[tuple[str, Experiment]] = []
    for name, text in await read_json_files(session, directory):
        try:
            experiment = parse(text)
        except (ValueError, KeyError, TypeError):
            continue
        found.append((posixpath.join(directory, name), experiment))
    found.sort(key=lambda item: (item[1].started, item[0]))
    await asyncio.to_thread(_cache, session.name, [e for _, e in found])
    return found


def _cache(host: str, experiments: Sequence[Experiment]) -> None:
    try:
        for experiment in experiments:
            save(experiment, cache_dir(host))
    except OSError:  # only a cache: the host's ledger was read all the same
        pass


def save(experiment: Experiment, directory: Path | None = None) -> Path:
    """Write the experiment once into a directory on this machine (the console's cache by
    default; a package's `experiments/HOST/`); a file that already holds it is left as it is."""
    target = (directory or cache_dir(experiment.host)) / experiment.file_name()
    target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    if not target.exists():
        write_file(target, text_of(experiment).encode(), publish_new, mode=0o644)
    return target


def load(host: str, directory: Path | None = None) -> list[tuple[Path, Experiment]]:
    """The experiments in a directory on this machine (the console's cache of `host` by
    default), oldest first; unreadable files are skipped."""
    where = directory or cache_dir(host)
    found: list[tuple[Path, Experiment]] = []
    for path in sorted(where.glob("*.json")) if where.is_dir() else []:
        try:
            experiment = parse(path.read_text(encoding="utf-8"))
        except (OSError, ValueError, KeyError, TypeError):
            continue
        found.append((path, experiment))
    found.sort(key=lambda item: (item[1].started, item[0].name))
    return found


def cached(host: str, why: str) -> tuple[list[Experiment], str]:
    """The console's cached copy of the host's ledger, and where it was read (with `why`)."""
    return [e for _, e in load(host)], f"the console's cached copy of its ledger ({why})"


async def read_ledger(session: HostSession) -> tuple[list[Experiment], str]:
    """The host's ledger, else (the host unreachable, the read refused) the console's cached
    copy; and where it was read, in words."""
    try:
        found = await load_from_host(session)
    except RemoteError as exc:
        return cached(session.name, f"the host's could not be read: {exc}")
    service = session.profile.service
    return [e for _, e in found], f"the host's ledger ({host_dir(service.unit, service.state_dir)})"


class NotOnHost(RemoteError):
    """The experiment could not be written on the host; the console's cache holds it."""


# --- recording a change --------------------------------------------------------------------

OUTCOMES = {"applied": "kept", "rolled back": "rolled_back", "failed": "failed"}


async def current_invocation(session: HostSession) -> str | None:
    """The unit's InvocationID now: the run a change is about to leave."""
    return (await read_status(session, with_flags=False)).invocation_id or None


class Change(Protocol):
    """What the ledger needs of a change (console/tuning/plan.py's Plan is one)."""

    @property
    def unit(self) -> str: ...
    @property
    def old_values(self) -> Mapping[str, Any]: ...
    @property
    def new_values(self) -> Mapping[str, Any]: ...
    def masked(self, values: Mapping[str, Any]) -> Mapping[str, Any]: ...


async def _measure_side(
    session: HostSession, unit: str, invocation: str | None, last_s: float | None, window: str
) -> tuple[dict[str, WindowStats], str]:
    try:
        return await measure(session, unit, invocation, last_s), window
    except RemoteError as exc:  # the experiment is still recorded, without these numbers
        return {}, f"not measured: {exc}"


async def record_rollout(
    session: HostSession,
    change: Change,
    result: RolloutFinished,
    *,
    before_invocation: str | None,
    started: str,
    source: str,
    action: ChangeAction = ChangeAction.SET,
    cause: str = "",
    rollout: str = "",
) -> PurePosixPath:
    """Measure both invocations from the journal and record the experiment on the host (and
    in the console's cache); its path on the host. Raises NotOnHost when the host's copy
    could not be written (the cache's is named in the message).

    `source` names the console part ("cli", "tui"); `action` what asked for the change;
    `cause` says why, e.g. the signature probation saw. Secret flags' values are recorded
    masked (`change.masked`)."""
    unit, old_values, new_values = change.unit, change.old_values, change.new_values
    tried = result.invocation_id if result.ok else result.failed_invocation
    before, before_window = await _measure_side(
        session, unit, before_invocation, BEFORE_S, f"last {BEFORE_S:.0f} s of its run"
    )
    after, after_window = await _measure_side(
        session, unit, tried, None, "from its first decode line until the change ended"
    )
    release = getattr(change, "release", None)
    experiment = Experiment(
        host=session.name,
        unit=unit,
        started=started,
        finished=utc_now(),
        outcome=OUTCOMES.get(result.outcome.value, result.outcome.value),
        before=Side(before_invocation, dict(change.masked(old_values)), before, before_window),
        after=Side(tried, dict(change.masked(new_values)), after, after_window),
        reason=result.reason,
        signature=result.signature,
        phase=result.phase,
        release=release if isinstance(release, str) else None,
        source=source,
        kind=action.kind,
        action=action.value,
        cause=cause,
        rollout=rollout,
        xids=result.xids,
        gpu_memory=fullest_text(result.gpus_at_ready),
    )
    try:
        cached = f"only the console has it: {await asyncio.to_thread(save, experiment)}"
    except OSError as exc:  # a cache that cannot be written never stops the host's copy
        cached = f"nor in the console's cache ({exc})"
    try:
        return PurePosixPath(await save_on_host(session, experiment))
    except RemoteError as exc:
        raise NotOnHost(session.name, f"not written on the host ({exc}); {cached}") from exc


def running_at(
    experiments: Sequence[tuple[str, Experiment]], when: float
) -> tuple[str, Mapping[str, Any]] | None:
    """(the experiment's path, flags) of the configuration the ledger says ran at `when`.

    The newest change begun before `when` decides: its new flags if it was kept, its old ones
    if it was rolled back (the rollback restored them). Before the first change, that change's
    old flags. None when the ledger is empty.
    """
    if not experiments:
        return None
    ordered = sorted(experiments, key=lambda item: item[1].started)
    begun = [(p, e) for p, e in ordered if datetime.fromisoformat(e.started).timestamp() <= when]
    if not begun:
        path, first = ordered[0]
        return path, first.before.flags
    path, last = begun[-1]
    return path, (last.after.flags if last.kept else last.before.flags)
