"""The operator's local state: where it lives, and each host's last good configuration.

specops keeps two things on the operator's machine: the audit log (console/local/audit.py) and,
for every host, the configuration that last passed a rollout (health and smoke test). The
latter answers "what was the last setting that worked?" after a bad night of tuning, and is
what `specops flags` shows next to the live values. Files are written atomically (temp name,
fsync, rename), so a crash or a full disk never leaves half a record behind.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from console.hosts.profiles import NAME_RE, FlagValue
from console.local.files import publish_replacing, write_file
from console.local.settings import state_dir


def write_atomic(path: Path, text: str) -> None:
    """Replace `path` with `text` in one step: readers see the old file or the new one."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    write_file(path, text.encode("utf-8"), publish_replacing)


@dataclass(frozen=True)
class LastGood:
    """A configuration that came up healthy and answered the smoke test."""

    host: str
    unit: str
    values: Mapping[str, FlagValue]
    """The profile's flags as they were read from the effective unit."""
    argv: Sequence[str]
    environment: Mapping[str, str]
    dropin: str | None
    """specops's drop-in text at that time; None when the unit ran without one."""
    invocation_id: str
    saved_at: float = field(default_factory=time.time)


def _last_good_path(host: str) -> Path:
    if not NAME_RE.match(host):
        raise ValueError(f"host name {host!r} cannot name a state file")
    return state_dir() / "last-good" / f"{host}.json"


def save_last_good(record: LastGood) -> Path:
    path = _last_good_path(record.host)
    data = asdict(record)
    data["values"] = dict(record.values)
    data["argv"] = list(record.argv)
    data["environment"] = dict(record.environment)
    write_atomic(path, json.dumps(data, indent=2, sort_keys=True) + "\n")
    return path


def load_last_good(host: str) -> LastGood | None:
    """The host's last good configuration, or None (never saved, or unreadable)."""
    path = _last_good_path(host)
    try:
        data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        return LastGood(
            host=str(data["host"]),
            unit=str(data["unit"]),
            values=dict(data["values"]),
            argv=[str(a) for a in data["argv"]],
            environment={str(k): str(v) for k, v in data["environment"].items()},
            dropin=None if data["dropin"] is None else str(data["dropin"]),
            invocation_id=str(data["invocation_id"]),
            saved_at=float(data["saved_at"]),
        )
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
