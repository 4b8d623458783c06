"""The experiment ledger: every flag change as a record of what it did to the numbers.

A rollout answers "did it come up"; a tuning campaign asks "was it better". Each change
(`specops set`, the TUI's flag editor) leaves one experiment: the host, the flag values before
and after, the outcome (kept, or rolled back with the crash signature and phase, or the wrong
smoke answer), and the metric windows read from the journal of both invocations — the previous
configuration's last minutes and the new one's run from its first decode line on: accept
length, accept rate, generation throughput, running and queued requests, each as count, mean,
p50, p10 / p90 and standard deviation.

Each experiment is one JSON file, written once and never changed:
`$XDG_STATE_HOME/specops/experiments/HOST/<UTC start>-<id>.json` on the console, mirrored by
every snapshot into the package's `experiments/HOST/` (so the manifest lists it and the
report can cite it). The host's own history (`/var/lib/specops/UNIT/`, issue 15) is where a
merged version should keep it; until then the ledger stands on the console's state directory.

No Textual; reads the journal through the session's fixed vocabulary (console/transport/remote.py).
"""

from __future__ import annotations

import hashlib
import json
import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from console.events import JournalEntry, RolloutFinished
from console.files import publish_new, write_file
from console.service.status import read_status
from console.settings import state_dir
from console.transport import remote
from console.transport.ssh import CommandFailed, HostSession
from console.watch.journal import decode_lines
from console.watch.sglang import DecodeBatch, parse_line

FORMAT = "specops-experiment/1"
EXPERIMENTS_DIR = "experiments"
SERIES = ("accept_len", "accept_rate", "gen_throughput", "running_req", "queue_req")
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
    source: str = "cli"

    @property
    def kept(self) -> bool:
        return self.outcome == "kept"

    def record(self) -> dict[str, Any]:
        data = asdict(self)
        data["format"] = FORMAT
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


def ledger_dir(host: str) -> Path:
    return state_dir() / EXPERIMENTS_DIR / host


def save(experiment: Experiment, directory: Path | None = None) -> Path:
    """Write the experiment once (a file that already holds it is left as it is)."""
    target = (directory or ledger_dir(experiment.host)) / experiment.file_name()
    target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    if not target.exists():
        text = json.dumps(experiment.record(), indent=2, sort_keys=True) + "\n"
        write_file(target, text.encode(), publish_new, mode=0o644)
    return target


def load(host: str, directory: Path | None = None) -> list[tuple[Path, Experiment]]:
    """The host's experiments, oldest first; unreadable files are skipped."""
    where = directory or ledger_dir(host)
    found: list[tuple[Path, Experiment]] = []
    for path in sorted(where.glob("*.json")) if where.is_dir() else []:
        try:
            experiment = Experiment.from_record(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError, KeyError, TypeError):
            continue
        found.append((path, experiment))
    found.sort(key=lambda item: (item[1].started, item[0].name))
    return found


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


async def record_rollout(
    session: HostSession,
    change: Change,
    result: RolloutFinished,
    *,
    before_invocation: str | None,
    started: str,
    source: str,
) -> Path:
    """Measure both invocations from the journal and save the experiment; its path."""
    unit, old_values, new_values = change.unit, change.old_values, change.new_values
    tried = result.invocation_id if result.ok else result.failed_invocation
    experiment = Experiment(
        host=session.name,
        unit=unit,
        started=started,
        finished=utc_now(),
        outcome=OUTCOMES.get(result.outcome.value, result.outcome.value),
        before=Side(
            before_invocation,
            dict(old_values),
            await measure(session, unit, before_invocation, last_s=BEFORE_S),
            f"last {BEFORE_S:.0f} s of its run",
        ),
        after=Side(
            tried,
            dict(new_values),
            await measure(session, unit, tried),
            "from its first decode line until the change ended",
        ),
        reason=result.reason,
        signature=result.signature,
        phase=result.phase,
        source=source,
    )
    return save(experiment)


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
