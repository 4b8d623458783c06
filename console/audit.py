"""The audit log: every remote command specops ran, on which host, and how it ended.

When a host misbehaves after a tuning session, "what exactly did the console do to it?"
must have a precise answer. `HostSession` reports every command it runs (`CommandRecord`);
this module appends each one as a JSON line to `<state dir>/audit.jsonl`: time, host, the
exact shell command, exit status (null when the link dropped), duration. Values that look
like secrets (after `--api-key`, `--token`, …, or in `*_KEY=`/`*_TOKEN=` words) are replaced
before anything is written. Each record is one `write(2)` on an `O_APPEND` descriptor, so
concurrent specops processes interleave whole lines, never bytes.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from console.settings import state_dir
from console.transport.ssh import CommandRecord

log = logging.getLogger(__name__)

REDACTED = "***"

_SECRET_PARTS = frozenset(
    {
        "key",
        "keys",
        "apikey",
        "token",
        "secret",
        "secrets",
        "password",
        "passwd",
        "passphrase",
        "credential",
        "credentials",
    }
)
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _is_secret_name(name: str) -> bool:
    """`--api-key`, `--hf_token`, `HF_TOKEN`, `DB_PASSWORD`; not `--num-draft-tokens`."""
    parts = re.split(r"[-_.]+", name.strip("-").lower())
    return any(part in _SECRET_PARTS for part in parts)


def redact(command: str) -> str:
    """The command with secret-looking values replaced; unchanged text when there are none."""
    try:
        words = shlex.split(command)
    except ValueError:
        # Not valid shell (it never is for our own commands): hide every NAME=value at least.
        return re.sub(
            r"((?:--?)?[A-Za-z_][\w.-]*=)\S+",
            lambda m: m.group(1) + REDACTED if _is_secret_name(m.group(1)[:-1]) else m.group(0),
            command,
        )
    out: list[str] = []
    hide_next = False
    changed = False
    for word in words:
        if hide_next and not word.startswith("-"):
            out.append(REDACTED)
            hide_next, changed = False, True
            continue
        hide_next = False
        name, eq, _ = word.partition("=")
        is_option = word.startswith("-")
        if (is_option or (eq and _ENV_NAME.match(name))) and _is_secret_name(name):
            if eq:
                out.append(f"{name}={REDACTED}")
                changed = True
                continue
            hide_next = is_option
        out.append(word)
    return shlex.join(out) if changed else command


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

    def __init__(self, path: Path | None = None) -> None:
        self.path = path if path is not None else audit_path()
        self._warned = False

    def record(self, command: CommandRecord) -> None:
        entry = AuditRecord(
            time=datetime.fromtimestamp(command.started, UTC).isoformat(timespec="milliseconds"),
            host=command.host,
            command=redact(command.command),
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
