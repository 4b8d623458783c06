"""`specops manifest PACKAGE`: after the operator edits a package by hand, the rewritten
manifest lists exactly what changed and the real `sha256sum -c` passes again."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from console.cli import main
from console.package.manifest import MANIFEST_NAME, refresh_manifest, verify, write_manifest

pytestmark = pytest.mark.skipif(shutil.which("sha256sum") is None, reason="needs coreutils")


def _sha256sum_check(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["sha256sum", "--strict", "-c", MANIFEST_NAME],
        cwd=root,
        capture_output=True,
        text=True,
        check=False,
    )


@pytest.fixture
def package(tmp_path: Path) -> Path:
    root = tmp_path / "pkg"
    for rel, text in {
        "bench/results_b300/ddtree_b8_graph.json": '{"output_throughput": 303.1}\n',
        "b300_logs/journal_excerpt.txt": "accept len: 4.36\n",
        "NOTES.md": "first draft\n",
        "old.txt": "to be deleted\n",
    }.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    write_manifest(root)
    return root


def _hand_edit(root: Path) -> None:
    (root / "NOTES.md").write_text("edited by the operator\n")
    (root / "old.txt").unlink()
    (root / "FINDINGS.md").write_text("budget 8 + NVLS + graphs wins\n")
    (root / "bench" / "upload.json.part").write_text("half a download")


def test_hand_edits_break_sha256sum_and_manifest_repairs_it(
    package: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _hand_edit(package)
    assert _sha256sum_check(package).returncode != 0

    assert main(["manifest", str(package)]) == 0

    printed = capsys.readouterr().out
    assert "ADDED    FINDINGS.md" in printed
    assert "CHANGED  NOTES.md" in printed
    assert "REMOVED  old.txt" in printed
    assert "1 added, 1 changed, 1 removed, 2 unchanged" in printed
    assert ".part" not in printed
    check = _sha256sum_check(package)
    assert check.returncode == 0, check.stdout + check.stderr
    assert "FINDINGS.md: OK" in check.stdout
    listed = (package / MANIFEST_NAME).read_text()
    assert "upload.json.part" not in listed and MANIFEST_NAME not in listed
    assert verify(package).clean


def test_dry_run_lists_changes_and_writes_nothing(
    package: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _hand_edit(package)
    before = (package / MANIFEST_NAME).read_bytes()

    assert main(["manifest", str(package), "--dry-run", "--json"]) == 0

    record = json.loads(capsys.readouterr().out)
    assert record["added"] == ["FINDINGS.md"]
    assert record["changed"] == ["NOTES.md"]
    assert record["removed"] == ["old.txt"]
    assert record["written"] is False
    assert (package / MANIFEST_NAME).read_bytes() == before


def test_second_run_is_a_no_op_and_byte_identical(package: Path) -> None:
    _hand_edit(package)
    first = refresh_manifest(package)
    text = (package / MANIFEST_NAME).read_bytes()
    mtime = (package / MANIFEST_NAME).stat().st_mtime_ns

    second = refresh_manifest(package)

    assert first.written and not second.written and not second.any
    assert (package / MANIFEST_NAME).read_bytes() == text
    assert (package / MANIFEST_NAME).stat().st_mtime_ns == mtime


def test_package_without_manifest_gets_one_listing_every_file(tmp_path: Path) -> None:
    root = tmp_path / "fresh"
    (root / "a").mkdir(parents=True)
    (root / "a" / "x.json").write_text("{}\n")

    changes = refresh_manifest(root)

    assert changes.added == ("a/x.json",) and not changes.had_manifest
    assert _sha256sum_check(root).returncode == 0


def test_malformed_old_lines_are_dropped_and_reported(
    package: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    manifest = package / MANIFEST_NAME
    manifest.write_text(manifest.read_text() + "not a manifest line\n")

    assert main(["manifest", str(package)]) == 0

    assert "DROPPED  line 5: expected 64 hex digits" in capsys.readouterr().out
    assert _sha256sum_check(package).returncode == 0


def test_not_a_directory_is_bad_usage(tmp_path: Path) -> None:
    assert main(["manifest", str(tmp_path / "nope")]) == 2
