"""The audit log: secrets never written, one whole line per command, torn lines skipped."""

from __future__ import annotations

import json
import multiprocessing
from pathlib import Path

import pytest

from console.local.audit import REDACTED, AuditLog, audit_path, redact
from console.transport.ssh import CommandRecord


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        (
            "python3 -m sglang.launch_server --api-key s3cr3t --port 1",
            f"python3 -m sglang.launch_server --api-key '{REDACTED}' --port 1",
        ),
        ("serve --hf-token=hf_abc --tp 8", f"serve '--hf-token={REDACTED}' --tp 8"),
        (
            "env HF_TOKEN=hf_abc OPENAI_API_KEY=sk-1 DB_PASSWORD=x run",
            f"env 'HF_TOKEN={REDACTED}' 'OPENAI_API_KEY={REDACTED}' 'DB_PASSWORD={REDACTED}' run",
        ),
        ("run --client-secret 'two words' --x 1", f"run --client-secret '{REDACTED}' --x 1"),
    ],
)
def test_secrets_are_redacted(command: str, expected: str) -> None:
    assert redact(command) == expected
    assert "s3cr3t" not in redact(command) and "hf_abc" not in redact(command)


@pytest.mark.parametrize(
    "command",
    [
        "python3 -m sglang.launch_server --speculative-num-draft-tokens 16 --max-total-tokens 9",
        "systemctl show --property=ActiveState -- sglang-k26-ddtree.service",
        "journalctl -u x.service '--after-cursor=s=1;i=2' _SYSTEMD_INVOCATION_ID=abc",
        "env SGLANG_DDTREE_MAX_TOPK=4 MAX_TOKENS=8 run",
        "run --enable-auth-key --port 1",  # a switch: the next option is not its value
    ],
)
def test_ordinary_commands_are_kept_exactly(command: str) -> None:
    assert redact(command) == command


def test_unparsable_command_still_hides_secret_assignments() -> None:
    assert redact("echo 'unbalanced API_KEY=abc") == f"echo 'unbalanced API_KEY={REDACTED}"


def test_records_are_appended_as_json_lines_and_read_back(tmp_path: Path) -> None:
    log = AuditLog(tmp_path / "state" / "audit.jsonl")
    log.record(CommandRecord("b300", "systemctl restart -- u.service", 0, 0.25, 1_700_000_000.0))
    log.record(CommandRecord("b300", "run --token abc", None, 1.5, 1_700_000_001.0))
    with log.path.open("a") as fh:
        fh.write('{"time": "torn')  # a writer that died mid-line
    records = list(log.read())
    assert [r.command for r in records] == [
        "systemctl restart -- u.service",
        f"run --token '{REDACTED}'",
    ]
    assert records[0].time == "2023-11-14T22:13:20.000+00:00"
    assert records[0].exit == 0 and records[1].exit is None
    assert records[1].duration_s == 1.5
    assert "abc" not in log.path.read_text()
    assert log.path.stat().st_mode & 0o777 == 0o600


def _write_many(path: str, worker: int) -> None:
    log = AuditLog(Path(path))
    for i in range(200):
        log.record(CommandRecord(f"h{worker}", "x" * 3000 + f" {i}", 0, 0.0, 0.0))


def test_concurrent_writers_never_interleave_within_a_line(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    procs = [multiprocessing.Process(target=_write_many, args=(str(path), w)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(30)
    lines = path.read_text().splitlines()
    assert len(lines) == 800
    assert all(json.loads(line)["command"].startswith("xxx") for line in lines)


def test_default_path_is_in_the_state_dir(isolated_home: Path) -> None:
    assert audit_path() == isolated_home / ".local" / "state" / "specops" / "audit.jsonl"
