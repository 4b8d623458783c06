"""The audit log: every remote command specops ran, on which host, and how it ended.

Beside the commands, one entry per operator action (`"kind": "action"`): what was intended
(`budget 8 → 16`), the drop-in that was written (secrets redacted) and how it ended, so
"what did we try on b300 last night?" does not mean reading `tee` and `mv` lines. Status
polls (`systemctl show`, `cat`, `is-active`) are most of the log and change nothing;
`specops audit` leaves them out unless asked (`--all`).

When a host misbehaves after a tuning session, "what exactly did the console do to it?"
must have a precise answer. `HostSession` reports every command it runs (`CommandRecord`);
this module appends each one as a JSON line to `<state dir>/audit.jsonl`: time, host, the
exact shell command, exit status (null when the link dropped), duration. Values that look
like secrets are replaced before anything is written, by the one redaction the package uses
too (console/local/redaction.py). Each record is one `write(2)` on an `O_APPEND` descriptor, so
concurrent specops processes interleave whole lines, never bytes.
"""

from __future__ import annotations

import json
import logging
import os
import shlex
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from console.local.redaction import REDACTED as REDACTED  # re-exported: the audit log's marker
from console.local.redaction import redact as redact  # re-exported with REDACTED
from console.local.redaction import redact_dropin
from console.local.settings import state_dir
from console.transport.ssh import CommandRecord

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class AuditRecord:
    time: str
    """ISO 8601, UTC, when the command started."""
    host: str
    command: str
    exit: int | None
    """The exit status; None when the connection dropped before the command finished, or
    specops stopped it (`stopped`)."""
    duration_s: float
    stopped: bool = False
    """specops stopped the command itself (a journal follower closed): not a lost link."""

    @property
    def status(self) -> str:
        """`exit 0`, `stopped`, or `link lost`: what became of the command, in words."""
        if self.exit is not None:
            return f"exit {self.exit}"
        return "stopped" if self.stopped else "link lost"

    def to_json(self) -> str:
        data: dict[str, object] = {
            "time": self.time,
            "host": self.host,
            "command": self.command,
            "exit": self.exit,
            "duration_s": self.duration_s,
        }
        if self.stopped:
            data["stopped"] = True
        return json.dumps(data, ensure_ascii=False)


@dataclass(frozen=True)
class ActionRecord:
    time: str
    host: str
    action: str
    """`set` (CLI) or `flags` (the TUI's editor)."""
    intent: str
    outcome: str
    dropin: str | None = None
    """The drop-in text written for the change (secret values redacted)."""

    def to_json(self) -> str:
        return json.dumps(
            {
                "kind": "action",
                "time": self.time,
                "host": self.host,
                "action": self.action,
                "intent": self.intent,
                "dropin": self.dropin,
                "outcome": self.outcome,
            },
            ensure_ascii=False,
        )


def action_record(
    host: str, action: str, intent: str, outcome: str, dropin: str | None = None
) -> ActionRecord:
    now = datetime.now(UTC).isoformat(timespec="milliseconds")
    text = None if dropin is None else redact_dropin(dropin)
    return ActionRecord(now, host, action, intent, outcome, text)


_POLLS = (("systemctl", "show"), ("systemctl", "cat"), ("systemctl", "is-active"))


def is_poll(command: str) -> bool:
    """A status read that changes nothing (`systemctl show …`), run on every poll."""
    try:
        words = shlex.split(command)
    except ValueError:
        return False
    while words and words[0] in ("sudo", "-n", "--"):
        words = words[1:]
    return tuple(w for w in words[:3] if not w.startswith("-"))[:2] in _POLLS


def audit_path() -> Path:
    return state_dir() / "audit.jsonl"


class AuditLog:
    """Append-only JSONL; pass `record` as a HostSession's `on_command`."""

    def __init__(self, path: Path | None = None, secrets: Collection[str] = ()) -> None:
        self.path = path if path is not None else audit_path()
        self.secrets = frozenset(secrets)
        """More names to hide: the `secret = true` flags' arguments and variables."""
        self._warned = False

    def record(self, command: CommandRecord) -> None:
        entry = AuditRecord(
            time=datetime.fromtimestamp(command.started, UTC).isoformat(timespec="milliseconds"),
            host=command.host,
            command=redact(command.command, self.secrets),
            exit=command.returncode,
            duration_s=round(command.duration_s, 4),
            stopped=command.stopped,
        )
        self.append(entry)

    def append(self, entry: AuditRecord | ActionRecord) -> None:
        data = (entry.to_json() + "\n").encode("utf-8")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                os.write(fd, data)  # one write per record: lines never interleave
            finally:
                os.close(fd)
        except OSError as exc:
            if not self._warned:  # the command itself must not fail because of its log
                log.warning("cannot write the audit log %s: %s", self.path, exc)
                self._warned = True

    def action(self, entry: ActionRecord) -> None:
        """Append one action entry (same one-write guarantee as a command's)."""
        self.append(entry)

    def entries(self) -> Iterator[AuditRecord | ActionRecord]:
        """Commands and actions, oldest first."""
        try:
            fh = self.path.open(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return
        with fh:
            for line in fh:
                try:
                    data = json.loads(line)
                    if data.get("kind") == "action":
                        yield ActionRecord(
                            time=str(data["time"]),
                            host=str(data["host"]),
                            action=str(data["action"]),
                            intent=str(data["intent"]),
                            outcome=str(data["outcome"]),
                            dropin=None if data.get("dropin") is None else str(data["dropin"]),
                        )
                        continue
                    yield _command_record(data)
                except (ValueError, KeyError, TypeError, AttributeError):
                    continue

    def read(self) -> Iterator[AuditRecord]:
        """Every record, oldest first; a torn or foreign line is skipped."""
        try:
            fh = self.path.open(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return
        with fh:
            for line in fh:
                try:
                    yield _command_record(json.loads(line))
                except (ValueError, KeyError, TypeError, AttributeError):
                    continue


def _command_record(data: dict[str, object]) -> AuditRecord:
    exit_status = data["exit"]
    return AuditRecord(
        time=str(data["time"]),
        host=str(data["host"]),
        command=str(data["command"]),
        exit=None if exit_status is None else int(exit_status),  # type: ignore[call-overload]
        duration_s=float(data["duration_s"]),  # type: ignore[arg-type]
        stopped=data.get("stopped") is True,
    )
