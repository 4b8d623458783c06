"""The audit log: every remote command specops ran, on which host, and how it ended.

When a host misbehaves after a tuning session, "what exactly did the console do to it?"
must have a precise answer. `HostSession` reports every command it runs (`CommandRecord`);
this module appends each one as a JSON line to `<state dir>/audit.jsonl`: time, host, the
exact shell command, exit status (null when the link dropped), duration. Values that look
like secrets are replaced before anything is written, by the one redaction the package uses
too (console/redaction.py). Each record is one `write(2)` on an `O_APPEND` descriptor, so
concurrent specops processes interleave whole lines, never bytes.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from console.redaction import REDACTED as REDACTED  # re-exported: the audit log's marker
from console.redaction import redact as redact  # re-exported with REDACTED
from console.settings import state_dir
from console.transport.ssh import CommandRecord

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class AuditRecord:
    time: str
    """ISO 8601, UTC, when the command started."""
    host: str
    command: str
    exit: int | None
    """The exit status; None when the connection dropped before the command finished."""
    duration_s: float

    def to_json(self) -> str:
        return json.dumps(
            {
                "time": self.time,
                "host": self.host,
                "command": self.command,
                "exit": self.exit,
                "duration_s": self.duration_s,
            },
            ensure_ascii=False,
        )


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
        )
        self.append(entry)

    def append(self, entry: AuditRecord) -> None:
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

    def read(self) -> Iterator[AuditRecord]:
        """Every record, oldest first; a torn or foreign line is skipped."""
        try:
            fh = self.path.open(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return
        with fh:
            for line in fh:
                try:
                    data = json.loads(line)
                    yield AuditRecord(
                        time=str(data["time"]),
                        host=str(data["host"]),
                        command=str(data["command"]),
                        exit=None if data["exit"] is None else int(data["exit"]),
                        duration_s=float(data["duration_s"]),
                    )
                except (ValueError, KeyError, TypeError):
                    continue
