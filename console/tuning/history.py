"""Every configuration specops applies, recorded on the host itself.

The last good configuration used to live on one operator's machine, keyed by profile name:
two fleets with a host called `b300` shared it, a second laptop knew nothing, and a rollback
could only go to "the previous drop-in". Now each rollout writes an entry into
`/var/lib/specops/UNIT/history.json` on the host (temp name + rename, through `sudo -n` when
the profile says so) when it starts, and rewrites it with the outcome when it ends: the
drop-in, the flag values, who and when, kept / rolled back (signature, stage) / failed, the
accept length and generation throughput (mean tok/s over the soak's decode lines) of its
run. Any console and any profile name then agree on the history and on the last good entry
(the newest one that survived its soak). A rollout killed half way leaves its entry
"started"; the next one marks it "abandoned" and says so. A host never touched by specops
gets entry 0, "original": the unit without specops' drop-in.
"""

from __future__ import annotations

import getpass
import json
import posixpath
import re
import shlex
import socket
import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from console.hosts.events import ChangeAction, RolloutFinished, RolloutOutcome, Throughput
from console.hosts.profiles import SECRET_MASK, FlagValue, Profile
from console.local.redaction import is_secret_name, redact
from console.service.flags import read_flags
from console.service.unit import effective_service, without_file
from console.transport import remote
from console.transport.host_files import replace_file, unit_state_dir
from console.transport.ssh import CommandFailed, HostSession
from console.tuning.plan import Plan

MAX_ENTRIES = 200
"""Older entries are dropped (entry 0, the original, is always kept)."""

OUTCOMES = ("original", "started", "kept", "rolled_back", "failed", "abandoned")
GOOD = ("kept", "original")


def history_path(unit: str, root: str) -> str:
    """`ROOT/UNIT/history.json`, ROOT the profile's `service.state_dir`."""
    return posixpath.join(unit_state_dir(unit, root), "history.json")


def operator() -> str:
    """Who applied it: `user@machine` of the console."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "?"
    return f"{user}@{socket.gethostname()}"


@dataclass(frozen=True)
class HistoryEntry:
    n: int
    kind: str
    """"original", "change" or "rollback" (an operator's or probation's rollback)."""
    outcome: str
    values: Mapping[str, FlagValue]
    argv: Sequence[str]
    environment: Mapping[str, str]
    dropin: str | None
    """specops' drop-in; None: the unit ran without one."""
    started_at: float = field(default_factory=time.time)
    finished_at: float | None = None
    who: str = ""
    profile: str = ""
    invocation_id: str = ""
    reason: str = ""
    signature: str | None = None
    stage: str | None = None
    ready_to_crash_s: float | None = None
    kept_to_crash_s: float | None = None
    """A crash during probation (console/tuning/probation.py): seconds after it was kept."""
    accept_len: float | None = None
    throughput: Throughput | None = None
    """Generation throughput over the soak window (absent in histories written before it)."""
    soaked_s: float | None = None
    restarts: int | None = None
    """NRestarts of the failing invocation, read before reset-failed cleared it."""
    exception_line: str | None = None
    excerpt: Sequence[str] = ()
    rollout: str = ""
    """The group rollout it was part of (`set HOST HOST…`: its id on every host's entry);
    empty for a change of one host."""
    action: str = ""
    """What asked for it (ChangeAction: `set`, `rollback`, `probation-rollback`), as the
    audit log and the ledger name it; "" for the original (read from `kind` in entries
    written before)."""
    xids: Sequence[str] = ()
    """The GPU driver's Xid errors within 30 s of its crash (`Xid 31 on GPU 0 at …`)."""
    gpus_at_ready: Sequence[Mapping[str, Any]] = ()
    """Its GPUs when the server answered ready (`status --json`'s records)."""
    gpus_at_crash: Sequence[Mapping[str, Any]] = ()
    """Its GPUs read right after the crash."""

    @property
    def what(self) -> str:
        """The action (read from `kind` in entries written before), or "original"."""
        if self.action or self.kind == "original":
            return self.action or self.kind
        return ChangeAction.of_record(self.kind).value

    @property
    def good(self) -> bool:
        return self.outcome in GOOD

    def record(self) -> dict[str, Any]:
        data = asdict(self)
        data["values"] = dict(self.values)
        data["argv"] = list(self.argv)
        data["environment"] = dict(self.environment)
        data["excerpt"] = list(self.excerpt)
        for name in ("xids", "gpus_at_ready", "gpus_at_crash"):
            data[name] = [dict(v) if isinstance(v, Mapping) else v for v in getattr(self, name)]
        return data

    @classmethod
    def from_record(cls, data: Mapping[str, Any]) -> HistoryEntry:
        """An entry as the host's file holds it; ValueError or TypeError for a field of the
        wrong type. Text fields lose their control characters (a hostile file's ESC never
        reaches the terminal)."""
        names = set(cls.__dataclass_fields__)
        kept = {k: v for k, v in data.items() if k in names}
        for name, kinds in _FIELD_TYPES.items():
            value = kept.get(name)
            if value is not None and not isinstance(value, kinds):
                raise TypeError(f"history entry {data.get('n')!r}: {name} is {value!r}")
            if isinstance(value, str):
                kept[name] = _printable(value)
        kept["excerpt"] = tuple(_printable(str(line)) for line in kept.get("excerpt") or ())
        kept["xids"] = tuple(_printable(str(line)) for line in kept.get("xids") or ())
        for name in ("gpus_at_ready", "gpus_at_crash"):
            kept[name] = tuple(g for g in kept.get(name) or () if isinstance(g, dict))
        if (throughput := kept.get("throughput")) is not None:
            kept["throughput"] = Throughput(
                mean_tok_s=float(throughput["mean_tok_s"]), n=int(throughput["n"])
            )
        entry = cls(**kept)
        if entry.outcome not in OUTCOMES or not isinstance(entry.n, int):
            raise ValueError(f"history entry {data.get('n')!r}: outcome {entry.outcome!r}")
        return entry


_FIELD_TYPES: dict[str, type | tuple[type, ...]] = {
    "n": int,
    "kind": str,
    "outcome": str,
    "values": dict,
    "argv": list,
    "environment": dict,
    "dropin": str,
    "started_at": (int, float),
    "finished_at": (int, float),
    "who": str,
    "profile": str,
    "invocation_id": str,
    "reason": str,
    "signature": str,
    "stage": str,
    "exception_line": str,
    "excerpt": list,
    "xids": list,
    "gpus_at_ready": list,
    "gpus_at_crash": list,
    "rollout": str,
    "action": str,
}
"""What each field of a history entry must be (None aside) when read from the host."""

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _printable(text: str) -> str:
    return _CONTROL.sub("\ufffd", text)


class HistoryError(Exception):
    """The host's history cannot be read or written."""


async def load(session: HostSession, unit: str) -> list[HistoryEntry]:
    """The host's entries, oldest first ([] when specops never recorded anything there)."""
    path = history_path(unit, session.profile.service.state_dir)
    try:
        result = await session.run(remote.read_if_exists(path), timeout=30)
    except CommandFailed as exc:
        raise HistoryError(f"cannot read {path}: {exc}") from None
    return parse_history(result.stdout, path)


HISTORY_VERSION = 1


def parse_history(text: str, path: str) -> list[HistoryEntry]:
    """The entries of a history file's text; HistoryError naming the file and what is wrong
    for anything else (a hostile or damaged file is never a traceback, and one written by a
    newer specops is neither read as empty nor rewritten)."""
    if not text.strip():
        return []
    try:
        data = json.loads(text)
    except RecursionError:
        raise HistoryError(f"{path} is not a specops history (nested too deep)") from None
    except ValueError as exc:
        raise HistoryError(f"{path} is not a specops history ({exc})") from None
    if not isinstance(data, dict) or not isinstance(data.get("entries"), list):
        raise HistoryError(f"{path} is not a specops history (no list of entries)")
    version = data.get("version")
    if version != HISTORY_VERSION:
        raise HistoryError(
            f"{path} has version {version!r}; this specops reads version {HISTORY_VERSION} "
            "(a newer one wrote it?): refusing to read or rewrite it"
        )
    entries = []
    for i, record in enumerate(data["entries"]):
        if not isinstance(record, dict):
            raise HistoryError(f"{path}: entry {i} is not an object")
        try:
            entries.append(HistoryEntry.from_record(record))
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise HistoryError(f"{path}: entry {i}: {exc}") from None
    return entries


async def save(session: HostSession, unit: str, entries: Sequence[HistoryEntry]) -> str:
    """Replace the host's history in one step (temp name, then rename)."""
    path = history_path(unit, session.profile.service.state_dir)
    kept = list(entries)
    if len(kept) > MAX_ENTRIES:
        kept = [e for e in kept[:1] if e.kind == "original"] + kept[-(MAX_ENTRIES - 1) :]
    records = [e.record() for e in kept]
    text = json.dumps({"version": HISTORY_VERSION, "entries": records}, indent=1) + "\n"
    return await replace_file(session, path, text)


async def claim_probation_rollback(session: HostSession, unit: str, entry: HistoryEntry) -> bool:
    """Whether this console is the one to roll back `entry`'s crash on probation. Every
    console that watches the host sees the crash and counts down; each that reaches the end
    makes `ROOT/UNIT/probation-rollback-N-KEPT` (mkdir: atomic), and only the one that made
    it goes on, so two watches never restart the host twice. KEPT (when the entry was kept)
    keeps a history begun again from claiming with an old entry's number."""
    kept = int(entry.finished_at or entry.started_at)
    name = f"probation-rollback-{entry.n}-{kept}"
    directory = unit_state_dir(unit, session.profile.service.state_dir)
    path = posixpath.join(directory, name)
    await session.run(remote.make_dirs(directory), timeout=30)
    result = await session.run(remote.claim(path), check=False, timeout=30)
    if result.returncode == 0:
        return True
    if result.returncode == remote.CLAIMED_ALREADY:
        return False
    said = result.stderr.strip() or f"exit {result.returncode}"
    raise HistoryError(f"cannot claim the probation rollback ({path}): {said}")


def masked_argv(argv: Sequence[str], secrets: Collection[str]) -> list[str]:
    """A command line as the history records it: secret values masked."""
    return shlex.split(redact(shlex.join(argv), secrets))


def masked_environment(environment: Mapping[str, str], secrets: Collection[str]) -> dict[str, str]:
    return {k: SECRET_MASK if is_secret_name(k, secrets) else v for k, v in environment.items()}


def original_entry(profile: Profile, cat_text: str, dropin_path: str) -> HistoryEntry:
    """Entry 0: the unit's own configuration, without specops' drop-in."""
    service = effective_service(without_file(cat_text, dropin_path))
    values = read_flags(profile.flags, service.argv, service.environment)
    secrets = profile.secret_names
    return HistoryEntry(
        n=0,
        kind="original",
        outcome="original",
        values=profile.masked(values),
        argv=masked_argv(service.argv, secrets),
        environment=masked_environment(service.environment, secrets),
        dropin=None,
        who="the unit's own files",
        profile=profile.name,
    )


def running_values(profile: Profile, cat_text: str) -> dict[str, FlagValue]:
    """The profile's flags as the effective unit (`systemctl cat`) sets them now (secret
    values masked, as the history records them)."""
    service = effective_service(cat_text)
    return profile.masked(read_flags(profile.flags, service.argv, service.environment))


def current_entry(
    entries: Sequence[HistoryEntry], running: Mapping[str, FlagValue]
) -> HistoryEntry | None:
    """The entry the host runs now: the newest good one with the running values (None when
    the unit was changed outside specops since)."""
    return next((e for e in reversed(entries) if e.good and dict(e.values) == dict(running)), None)


def last_good(entries: Sequence[HistoryEntry]) -> HistoryEntry | None:
    """The newest configuration that survived its soak (or the original)."""
    return next((e for e in reversed(entries) if e.good), None)


def rollback_target(
    entries: Sequence[HistoryEntry], current: Mapping[str, FlagValue]
) -> HistoryEntry | None:
    """The newest good entry that is not what runs now (`specops rollback` with no `--to`)."""
    return next((e for e in reversed(entries) if e.good and dict(e.values) != dict(current)), None)


def mark_abandoned(entries: list[HistoryEntry]) -> list[HistoryEntry]:
    """Entries a killed console left "started" become "abandoned"; returns those."""
    found: list[HistoryEntry] = []
    for i, entry in enumerate(entries):
        if entry.outcome == "started":
            entries[i] = replace(
                entry,
                outcome="abandoned",
                reason="the console stopped before the change ended (killed or link lost); "
                "the host was left on whatever ran then",
            )
            found.append(entries[i])
    return found


def abandoned_note(entry: HistoryEntry) -> str:
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(entry.started_at))
    who = f"{entry.what} by {entry.who}, started {when}"
    return f"history entry {entry.n} ({who}) was abandoned half way"


async def settle_abandoned(session: HostSession, unit: str) -> list[HistoryEntry]:
    """Mark entries killed consoles left "started" as abandoned on the host; returns them."""
    entries = await load(session, unit)
    found = mark_abandoned(entries)
    if found:
        await save(session, unit, entries)
    return found


def next_number(entries: Sequence[HistoryEntry]) -> int:
    return max((e.n for e in entries), default=0) + 1


_OUTCOME = {
    RolloutOutcome.APPLIED: "kept",
    RolloutOutcome.ROLLED_BACK: "rolled_back",
    RolloutOutcome.FAILED: "failed",
}
EXCERPT_KEPT = 40


class Recorder:
    """One rollout's entry: written "started" before anything changes, rewritten at the end."""

    def __init__(
        self,
        session: HostSession,
        plan: Plan,
        action: ChangeAction = ChangeAction.SET,
        rollout: str = "",
    ) -> None:
        self.session = session
        self.plan = plan
        self.action = action
        self.rollout = rollout
        self.entry: HistoryEntry | None = None
        self.last_good: HistoryEntry | None = None
        """The host's last good entry when this rollout began (its rollback target)."""
        self.path = history_path(plan.unit, session.profile.service.state_dir)

    async def begin(self, cat_text: str) -> list[HistoryEntry]:
        """Record the start; returns the entries earlier consoles left abandoned."""
        entries = await load(self.session, self.plan.unit)
        abandoned = mark_abandoned(entries)
        known = bool(entries)
        if not entries:
            entries.append(original_entry(self.session.profile, cat_text, self.plan.dropin_path))
        # A drop-in from before the history began ran, but was never soaked: without history
        # the rollback target stays "what was there before", not the original.
        if known or self.plan.dropin_path not in self.plan.service.files:
            self.last_good = last_good(entries)
        plan = self.plan
        self.entry = HistoryEntry(
            n=next_number(entries),
            kind=self.action.kind,
            action=self.action.value,
            outcome="started",
            values=plan.masked(plan.new_values),
            argv=masked_argv(plan.new_argv, plan.secrets),
            environment=masked_environment(plan.new_environment, plan.secrets),
            dropin=plan.shown_dropin,
            who=operator(),
            profile=self.session.profile.name,
            started_at=self.session.clock.time(),
            rollout=self.rollout,
        )
        entries.append(self.entry)
        await save(self.session, plan.unit, entries)
        return abandoned

    async def end(self, result: RolloutFinished, restarts: int | None) -> HistoryEntry:
        """Rewrite the entry with how the rollout ended (re-read first: another console may
        have added entries meanwhile)."""
        assert self.entry is not None
        applied = result.outcome is RolloutOutcome.APPLIED
        entry = replace(
            self.entry,
            outcome=_OUTCOME[result.outcome],
            finished_at=self.session.clock.time(),
            invocation_id=result.invocation_id if applied else (result.failed_invocation or ""),
            reason=result.reason,
            signature=result.signature,
            stage=result.stage,
            ready_to_crash_s=result.ready_to_crash_s,
            accept_len=result.accept_len,
            throughput=result.throughput,
            soaked_s=result.soaked_s,
            restarts=restarts,
            exception_line=result.exception_line,
            excerpt=tuple(result.excerpt[-EXCERPT_KEPT:]),
            xids=result.xids,
            gpus_at_ready=result.gpus_at_ready,
            gpus_at_crash=result.gpus_at_crash,
        )
        entries = await load(self.session, self.plan.unit)
        numbers = [e.n for e in entries]
        if entry.n in numbers:
            entries[numbers.index(entry.n)] = entry
        else:
            entries.append(entry)
        await save(self.session, self.plan.unit, entries)
        self.entry = entry
        return entry
