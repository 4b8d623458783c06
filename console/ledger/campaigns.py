"""Tuning campaigns on the host: the record of a grid of flag settings and each cell's outcome.

A campaign (`specops sweep`, console/tuning/sweep.py) keeps its record on the host beside the
history and the experiment ledger, `/var/lib/specops/UNIT/campaigns/ID.json`, rewritten in one
step after every cell: the grid, the configuration it started from, each cell's outcome and
numbers, the cell running and its console (`user@machine`, pid). A console killed
mid-campaign leaves what a second one resumes, and a running record is the host's lock (until
it goes stale). The package mirrors these records (`campaigns/HOST/`) and the findings report
reads them from there, so the format lives here, below all three.
"""

from __future__ import annotations

import json
import posixpath
import re
import secrets
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

from console.hosts.profiles import FlagValue
from console.service.flags import format_value
from console.transport import remote
from console.transport.host_files import read_json_files, replace_file, unit_state_dir
from console.transport.ssh import HostSession, RemoteError

FORMAT = "specops-campaign/1"
CAMPAIGNS_DIR = "campaigns"
STALE_LOCK_S = 900.0
"""A running campaign whose record was not rewritten for this long lost its console (a cell
takes a restart, a soak and a window: minutes, never a quarter of an hour without a write)."""
ID_RE = re.compile(r"^[0-9]{8}T[0-9]{6}Z-[0-9a-f]{6}$")
OUTCOMES = ("pending", "measured", "crashed", "failed", "skipped", "baseline")


class CampaignError(Exception):
    """The campaign cannot start or go on (bad grid, a lock held, an unreadable record)."""


def cell_text(values: Mapping[str, FlagValue]) -> str:
    return " ".join(f"{k}={format_value(v)}" for k, v in values.items())


@dataclass
class Cell:
    values: dict[str, FlagValue]
    outcome: str = "pending"
    """pending, measured, crashed (rolled back), failed (not known healthy), skipped,
    baseline (the configuration running before the campaign, measured in place)."""
    reason: str = ""
    signature: str | None = None
    stage: str | None = None
    invocation: str | None = None
    history_entry: int | None = None
    accept_len: float | None = None
    accept_len_sd: float | None = None
    tok_s: float | None = None
    tok_s_sd: float | None = None
    n: int = 0
    """Decode lines the numbers are over."""
    bench_tok_s: float | None = None
    """The campaign's `--bench` command's output tok/s for this cell (None: none ran, or it
    gave no number; `bench_detail` says which)."""
    bench_detail: str = ""
    bench_file: str | None = None
    """Where on the host the benchmark wrote this cell's result."""
    finished_at: float | None = None

    def record(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Campaign:
    id: str
    host: str
    unit: str
    grid: dict[str, list[FlagValue]]
    start: dict[str, FlagValue]
    """The configuration the host ran when the campaign began (where `--keep original` ends)."""
    keep: str = "original"
    soak_s: float | None = None
    measure_s: float = 60.0
    prune: bool = True
    bench: list[str] | None = None
    """`--bench CMD` as an argv with `{out}` in it (console/tuning/bench_step.py), or None."""
    bench_timeout_s: float = 1800.0
    split: list[str] = field(default_factory=list)
    """`--split`: the hosts the grid's cells were dealt out among (this one runs its share)."""
    owner: str = ""
    """`user@machine` of the console running it."""
    owner_pid: int | None = None
    """Its process on that machine: a resume there checks it is gone."""
    state: str = "running"
    """running, finished (the host on its chosen end state), failed (it could not be
    returned), stopped (the operator stopped it; it may be resumed)."""
    current: int | None = None
    """The cell being run (its index), or None between cells."""
    baseline: Cell | None = None
    cells: list[Cell] = field(default_factory=list)
    end: str = ""
    """Where the host was left, in words."""
    created_at: float = field(default_factory=time.time)
    updated_at: float = field(default_factory=time.time)

    def record(self) -> dict[str, Any]:
        data = asdict(self)
        data["format"] = FORMAT
        return data

    @classmethod
    def from_record(cls, data: Mapping[str, Any]) -> Campaign:
        if data.get("format") != FORMAT:
            raise ValueError(f"not a {FORMAT} record")
        fields = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        fields["cells"] = [Cell(**c) for c in data.get("cells") or []]
        base = data.get("baseline")
        fields["baseline"] = Cell(**base) if isinstance(base, dict) else None
        campaign = cls(**fields)
        if not ID_RE.match(campaign.id) or any(c.outcome not in OUTCOMES for c in campaign.cells):
            raise ValueError(f"campaign {campaign.id!r}: a field is out of range")
        return campaign

    @property
    def done(self) -> int:
        return sum(c.outcome != "pending" for c in self.cells)

    def crashed(self) -> list[dict[str, FlagValue]]:
        return [c.values for c in self.cells if c.outcome == "crashed"]

    def best(self) -> Cell | None:
        """The fastest cell that stayed up (tok/s)."""
        up = [c for c in self.cells if c.outcome == "measured" and c.tok_s is not None]
        return max(up, key=lambda c: c.tok_s or 0.0) if up else None

    def speedup(self, cell: Cell, *, bench: bool = False) -> float | None:
        """The cell's tok/s over the baseline's (None when either was not measured); `bench`:
        the `--bench` command's tok/s, over the baseline's benchmark."""
        if self.baseline is None:
            return None
        mine, base = (cell.tok_s, self.baseline.tok_s)
        if bench:
            mine, base = (cell.bench_tok_s, self.baseline.bench_tok_s)
        return mine / base if base and mine is not None else None

    def speedup_text(self, cell: Cell, *, bench: bool = False) -> str:
        """`1.03×`, or `-`."""
        ratio = self.speedup(cell, bench=bench)
        return "-" if ratio is None else f"{ratio:.2f}×"

    def stale(self, now: float) -> bool:
        return self.state == "running" and now - self.updated_at > STALE_LOCK_S


def table_rows(campaign: Campaign) -> list[tuple[str, Cell]]:
    """The rows of a results table: `base` (when measured), then each cell numbered from 1."""
    rows = [("base", campaign.baseline)] if campaign.baseline else []
    return rows + [(str(n), c) for n, c in enumerate(campaign.cells, start=1)]


def cell_figures(campaign: Campaign, cell: Cell) -> dict[str, str]:
    """What a results table shows of a cell, as text: the flags of the grid, accept len and
    tok/s with their spread, the speedup over the baseline, and why it did not count."""
    accept = "-"
    if cell.accept_len is not None:
        accept = f"{cell.accept_len:.2f} ±{cell.accept_len_sd or 0:.2f}"
    tps = "-" if cell.tok_s is None else f"{cell.tok_s:.0f} ±{cell.tok_s_sd or 0:.0f}"
    bench = "-"
    if cell.bench_tok_s is not None:
        bench = f"{cell.bench_tok_s:.0f} {campaign.speedup_text(cell, bench=True)}"
    why = cell.signature or ("" if cell.outcome in ("measured", "pending") else cell.reason)
    if campaign.bench and cell.bench_tok_s is None and cell.outcome != "pending":
        why = why or cell.bench_detail
    return {
        "flags": cell_text({k: v for k, v in cell.values.items() if k in campaign.grid}),
        "accept len": accept,
        "tok/s": tps,
        "speedup": campaign.speedup_text(cell),
        "bench tok/s": bench,
        "why": why[:80],
    }


def new_id(now: float | None = None) -> str:
    stamp = datetime.fromtimestamp(now or time.time(), UTC).strftime("%Y%m%dT%H%M%SZ")
    return f"{stamp}-{secrets.token_hex(3)}"


def campaigns_dir(unit: str, root: str) -> str:
    """`ROOT/UNIT/campaigns`, ROOT the profile's `service.state_dir`."""
    return posixpath.join(unit_state_dir(unit, root), CAMPAIGNS_DIR)


def campaign_path(unit: str, campaign_id: str, root: str) -> str:
    if not ID_RE.match(campaign_id):
        raise CampaignError(f"{campaign_id!r} is no campaign id (YYYYmmddTHHMMSSZ-xxxxxx)")
    return posixpath.join(campaigns_dir(unit, root), f"{campaign_id}.json")


def text_of(campaign: Campaign) -> str:
    """The record's text, the same bytes on the host and in a package."""
    return json.dumps(campaign.record(), indent=1, sort_keys=True) + "\n"


async def save(session: HostSession, campaign: Campaign) -> str:
    """Rewrite the campaign's record on the host in one step."""
    campaign.updated_at = time.time()
    text = text_of(campaign)
    path = campaign_path(campaign.unit, campaign.id, session.profile.service.state_dir)
    return await replace_file(session, path, text)


async def load_all(session: HostSession, unit: str) -> list[Campaign]:
    """Every campaign record on the host, oldest first (unreadable files are skipped)."""
    found: list[Campaign] = []
    root = session.profile.service.state_dir
    for _, text in await read_json_files(session, campaigns_dir(unit, root)):
        try:
            found.append(Campaign.from_record(json.loads(text)))
        except (ValueError, KeyError, TypeError):
            continue
    return sorted(found, key=lambda c: c.created_at)


async def load(session: HostSession, unit: str, campaign_id: str) -> Campaign:
    path = campaign_path(unit, campaign_id, session.profile.service.state_dir)
    try:
        result = await session.run(remote.read_if_exists(path), timeout=30)
    except RemoteError as exc:
        raise CampaignError(f"cannot read {path}: {exc}") from None
    if not result.stdout.strip():
        raise CampaignError(f"no campaign {campaign_id} on {session.name} ({path})")
    try:
        return Campaign.from_record(json.loads(result.stdout))
    except (ValueError, KeyError, TypeError) as exc:
        raise CampaignError(f"{path} is not a specops campaign ({exc})") from None


def holder(campaigns: Sequence[Campaign], now: float, mine: str | None = None) -> Campaign | None:
    """The campaign that owns the host now: a running one, not stale, not `mine`."""
    for campaign in campaigns:
        if campaign.state == "running" and not campaign.stale(now) and campaign.id != mine:
            return campaign
    return None
