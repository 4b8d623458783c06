"""`specops report PACKAGE`: the findings report from a package holding the campaign's
evidence — an autoregressive baseline at 133 tok/s, DDTree budget 8 + NVLS + CUDA graphs at
303 tok/s, the 122-byte file a crashed sweep left, and a snapshot whose journal excerpt holds
an illegal memory access during CUDA graph capture."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from console.cli import main
from console.findings.report import REPORT_NAME, build_report
from console.findings.snapshot_crashes import excerpt_crashes
from console.hosts.events import JournalEntry
from console.package.excerpt import Excerpt, build_excerpt
from console.package.layout import write_metadata
from console.package.manifest import MANIFEST_NAME, write_manifest
from console.watch.journal import decode_lines

FIXTURES = Path(__file__).parents[2] / "fixtures" / "bench"
T0 = 1_796_200_000
CRASH = "torch.AcceleratorError: CUDA error: an illegal memory access was encountered"


def _entries(messages: list[str]) -> list[JournalEntry]:
    lines = [
        json.dumps(
            {
                "__CURSOR": f"s=abc;i={i:x}",
                "__REALTIME_TIMESTAMP": str((T0 + i) * 1_000_000),
                "MESSAGE": m,
                "_PID": "4007",
                "_SYSTEMD_INVOCATION_ID": "b" * 32,
            }
        )
        for i, m in enumerate(messages)
    ]
    return decode_lines("b300", lines)


def _sglang(i: int, text: str) -> str:
    return f"[2026-12-02 10:00:{i:02d} TP0] {text}"


def _excerpt(messages: list[str]) -> Excerpt:
    return build_excerpt(
        _entries(messages),
        host="b300",
        unit="sglang-k26-ddtree.service",
        command="journalctl -u sglang-k26-ddtree.service -o json",
        since="4 hours ago",
        patterns=["accept len"],
        context=5,
        limit=200,
    )


def _snapshot(package: Path, flags: dict[str, object], variant: str, crashed: bool) -> str:
    messages = [_sglang(0, "Load weight begin. avail mem=176.44 GB")]
    if crashed:
        messages += [
            _sglang(1, "Capture cuda graph begin. This can take up to several minutes."),
            _sglang(2, "Scheduler hit an exception: Traceback (most recent call last):"),
            '  File "cuda_graph_runner.py", line 412, in capture',
            CRASH,
        ]
    else:
        messages += [_sglang(3, "Decode batch, #running-req: 1, accept len: 4.36")]
    excerpt = _excerpt(messages)
    name = f"journal_excerpt.{variant}.txt"
    (package / "b300_logs").mkdir(parents=True, exist_ok=True)
    (package / "b300_logs" / name).write_text(excerpt.text)
    stats = (
        {}
        if crashed
        else {
            "accept_len": {
                "count": 40,
                "last": 4.4,
                "mean": 4.36,
                "p50": 4.37,
                "min": 4.1,
                "max": 4.6,
            }
        }
    )
    body = {
        "format": "specops-snapshot/1",
        "host": "b300",
        "unit": "sglang-k26-ddtree.service",
        "active_state": "activating" if crashed else "active",
        "sub_state": "auto-restart" if crashed else "running",
        "n_restarts": 2 if crashed else 0,
        "variant": variant,
        "flags": flags,
        "statistics": stats,
        "journal": {"crash_signatures": list(excerpt.crashes)},
        "artifacts": [{"path": f"b300_logs/{name}", "sha256": "0" * 64, "bytes": 1}],
    }
    return write_metadata(package, "b300", body).path


@pytest.fixture
def package(tmp_path: Path) -> Path:
    root = tmp_path / "k26-ddtree-repro"
    bench = root / "bench" / "results_b300"
    bench.mkdir(parents=True)
    for name in ("B300_ar.json", "B300_nvlsb8t4.json", "B300_b12t6.json"):
        shutil.copy(FIXTURES / name, bench / name)
    _snapshot(root, {"budget": 8, "topk": 4, "cuda_graph": True, "nvls": True}, "nvlsb8t4", False)
    _snapshot(root, {"budget": 16, "topk": 4, "cuda_graph": True, "nvls": True}, "nvlsb16t4", True)
    write_manifest(root)
    return root


def test_campaign_report_gives_the_exact_speedup_and_lists_the_crashed_run(package: Path) -> None:
    assert main(["report", str(package)]) == 0
    report = (package / REPORT_NAME).read_text()

    assert "## b300 · SGLang release not recorded in the package" in report
    assert "Speedup against **B300_ar** ([bench/results_b300/B300_ar.json]" in report
    assert "| 1024 | 303 tok/s (2.28×), accept 4.36 | 4723 tok/s (1.63×), accept 4.36 |" in report
    assert (
        "**B300_nvlsb8t4** (host=b300 model=Kimi-K2.6 speculative_algorithm=DDTREE budget=8 "
        "topk=4 cuda_graph=True nvls=True): 303 tok/s at C=1, context 1024, **2.28×** over "
        "B300_ar (133 tok/s), accept 4.36"
    ) in report
    crashed_row = next(line for line in report.splitlines() if "bench B300_b12t6" in line)
    assert "**no results (crashed run)** (122 bytes; not JSON" in crashed_row
    assert "budget=12 topk=6 cuda_graph=True" in crashed_row
    assert "(bench/results_b300/B300_b12t6.json)" in crashed_row


def test_snapshot_crash_is_named_with_its_phase_line_and_a_link_to_it(package: Path) -> None:
    report = build_report(package)

    row = next(line for line in report.splitlines() if "budget=16" in line)
    assert "**crashed**: illegal_memory_access during CUDA graph capture" in row
    assert "service activating/auto-restart, NRestarts 2" in row
    (crash,) = excerpt_crashes(package, "b300_logs/journal_excerpt.nvlsb16t4.txt")
    assert crash.line == CRASH
    excerpt = (package / "b300_logs/journal_excerpt.nvlsb16t4.txt").read_text().splitlines()
    assert excerpt[int(crash.evidence.rsplit("#L", 1)[1]) - 1].strip() == CRASH
    assert f"[{crash.evidence}](" in report
    ok_row = next(
        line for line in report.splitlines() if "snapshot: host=b300 variant=nvlsb8t4" in line
    )
    assert "ran, no crash signature" in ok_row


def test_accept_length_statistics_link_their_snapshot(package: Path) -> None:
    report = build_report(package)

    row = next(line for line in report.splitlines() if "its invocation's decode lines" in line)
    assert "| 40 | 4.36 | 4.37 | 4.10 | 4.60 | 4.40 |" in row
    assert "(snapshots/b300-" in row


def test_same_package_gives_byte_identical_report_and_sha256sum_passes(package: Path) -> None:
    assert main(["report", str(package)]) == 0
    first = (package / REPORT_NAME).read_bytes()
    manifest = (package / MANIFEST_NAME).read_bytes()

    assert main(["report", str(package)]) == 0

    assert (package / REPORT_NAME).read_bytes() == first
    assert (package / MANIFEST_NAME).read_bytes() == manifest
    assert f"  {REPORT_NAME}\n" in manifest.decode()
    check = subprocess.run(
        ["sha256sum", "--strict", "-c", MANIFEST_NAME], cwd=package, capture_output=True, text=True
    )
    assert check.returncode == 0, check.stdout + check.stderr


def test_out_file_elsewhere_links_back_into_the_package(package: Path, tmp_path: Path) -> None:
    out = tmp_path / "notes" / "findings.md"
    out.parent.mkdir()
    manifest = (package / MANIFEST_NAME).read_bytes()

    assert main(["report", str(package), "--out", str(out)]) == 0

    assert "(../k26-ddtree-repro/bench/results_b300/B300_ar.json)" in out.read_text()
    assert not (package / REPORT_NAME).exists()
    assert (package / MANIFEST_NAME).read_bytes() == manifest


def test_a_summary_file_of_unknown_concurrency_is_not_best_over_a_measured_cell(
    package: Path,
) -> None:
    (package / "bench" / "results_b300" / "ddtree_b4_graph.json").write_text(
        '{"budget": 4, "cuda_graph": true, "accept_length": 4.46, "output_throughput": 1709.0}'
    )

    report = build_report(package)

    best = report.split("### Best stable configuration", 1)[1]
    assert best.split("\n\n", 2)[1].startswith("**B300_nvlsb8t4**")


def test_serving_results_carry_their_release_and_accept_label(package: Path) -> None:
    shutil.copy(FIXTURES / "sglang-0.5.23_bench_serving.jsonl", package / "bench" / "results_b300")

    report = build_report(package)

    assert "## b300 · SGLang 0.5.23" in report
    assert "since server start or last /flush_cache" in report


def test_empty_package_and_bad_paths(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    assert "holds no bench file, snapshot or experiment" in build_report(tmp_path / "empty")
    assert main(["report", str(tmp_path / "missing")]) == 2
    assert main(["report", str(tmp_path / "empty"), "--out", str(tmp_path / "no/dir.md")]) == 2


def test_crafted_metadata_stays_inert_markdown(package: Path) -> None:
    """The attack run (issue 30): `report` copied `<script>` and markdown links from a bench
    file's metadata into REPORT.md verbatim."""
    record = json.loads(
        (FIXTURES / "sglang-0.5.23_bench_serving.jsonl").read_text().splitlines()[0]
    )
    record["tag"] = "<script>alert(1)</script> [click](http://evil.example) `x` | y"
    record["server_info"]["version"] = "0.5.23<img src=x onerror=alert(1)>"
    crafted = package / "bench" / "results_b300" / "crafted.jsonl"
    crafted.write_text(json.dumps(record) + "\n")

    report = build_report(package)

    assert "<script>" not in report and "<img" not in report
    assert "[click](http" not in report  # no link: its brackets escaped
    assert "&lt;script&gt;alert(1)&lt;/script&gt; \\[click\\](http://evil.example)" in report
    row = next(line for line in report.splitlines() if line.startswith("| bench crafted:"))
    assert len(re.findall(r"(?<!\\)\|", row)) == 4  # its three cells, no more


def test_a_configuration_kept_then_rolled_back_tells_one_story(tmp_path: Path) -> None:
    """Budget 16 passed its soak (kept), then `specops rollback` went back to budget 8: the
    change's row says what budget 16 is now, as the ledger's candidates below it do."""
    from console.ledger.ledger import Experiment, Side, WindowStats, save

    def side(invocation: str, budget: int) -> Side:
        stats = WindowStats.of([100.0 * budget] * 3)
        assert stats is not None
        return Side(invocation, {"budget": budget}, {"gen_throughput": stats})

    package = tmp_path / "pkg"
    ledger = package / "experiments" / "b300"
    for hour, (before, after, kind) in enumerate([("a", "b", "change"), ("b", "c", "rollback")]):
        budgets = (8, 16) if kind == "change" else (16, 8)
        start, end = f"2026-12-03T1{hour}:00:00+00:00", f"2026-12-03T1{hour}:05:00+00:00"
        sides = side(before * 32, budgets[0]), side(after * 32, budgets[1])
        save(Experiment("b300", "u", start, end, "kept", *sides, kind=kind), ledger)
    report = build_report(package)
    (change,) = [line for line in report.splitlines() if "change: budget=8 → budget=16" in line]
    assert "kept; 1600 tok/s; now: rolled back: by `specops rollback`" in change.replace("\\", "")
    assert "- not a candidate: budget=16, rolled back: by `specops rollback`" in report.replace(
        "\\", ""
    )


def test_a_crash_of_an_earlier_run_in_the_excerpt_is_not_pinned_on_the_running_one(
    tmp_path: Path,
) -> None:
    """The excerpt's window holds budget 16's crash in capture, then the run on budget 8 the
    snapshot saw (its first entry at T0 + 10): the snapshot row is budget 8 running, the crash
    is listed as an earlier run's (it read "crashed: illegal_memory_access (+3 more)")."""
    crashed = [
        _sglang(1, "Capture cuda graph begin. This can take up to several minutes."),
        _sglang(2, "Scheduler hit an exception: Traceback (most recent call last):"),
        CRASH,
    ]
    healthy = [_sglang(0, "Load weight begin. avail mem=176.44 GB")] * 6
    healthy += [_sglang(3, "Decode batch, #running-req: 1, accept len: 4.36")]
    excerpt = _excerpt(crashed + healthy)
    package = tmp_path / "pkg"
    (package / "b300_logs").mkdir(parents=True)
    (package / "b300_logs" / "journal_excerpt.txt").write_text(excerpt.text)
    first = f"s=abc;i={len(crashed):x};t={(T0 + len(crashed)) * 1_000_000:x}"
    body = {
        "format": "specops-snapshot/1",
        "host": "b300",
        "unit": "sglang-k26-ddtree.service",
        "active_state": "active",
        "sub_state": "running",
        "n_restarts": 1,
        "invocation": {"id": "c" * 32, "first_cursor": first},
        "flags": {"budget": 8, "cuda_graph": True},
        "journal": {"crash_signatures": list(excerpt.crashes)},
        "artifacts": [{"path": "b300_logs/journal_excerpt.txt", "sha256": "0" * 64, "bytes": 1}],
    }
    write_metadata(package, "b300", body)
    report = build_report(package).replace("\\", "")
    (row,) = [line for line in report.splitlines() if line.startswith("| snapshot:")]
    assert "ran, no crash signature in this run's journal" in row
    assert "1 crash(es) of earlier runs in the excerpt" in row and "**crashed**" not in row
    (crash,) = [line for line in report.splitlines() if "an earlier run: " in line]
    assert "illegal memory access" in crash


def test_a_crash_with_its_xid_says_the_gpus_side_in_the_report(tmp_path: Path) -> None:
    """Issue 33: `illegal_memory_access …; Xid 31 on GPU 0 at 12:01:06 …; at ready: GPU 0
    70.1 of 80 GiB` in the change's row, from the experiment the rollout recorded."""
    from console.ledger.ledger import Experiment, Side, load, save

    xid = (
        "Xid 31 on GPU 0 at 12:01:06 (python3, pid 4014): GPU memory page fault: a kernel's "
        "illegal memory access"
    )
    package = tmp_path / "pkg"
    ledger = package / "experiments" / "b300"
    crashed = Experiment(
        "b300",
        "u",
        "2026-12-03T12:00:00+00:00",
        "2026-12-03T12:02:00+00:00",
        "rolled_back",
        Side("a" * 32, {"budget": 8}),
        Side("b" * 32, {"budget": 16}),
        signature="illegal_memory_access",
        phase="decoding",
        xids=(xid,),
        gpu_memory="GPU 0 70.1 of 80 GiB",
    )
    save(crashed, ledger)
    ((_, again),) = load("b300", ledger)
    assert again == crashed  # the record keeps both
    (row,) = [
        line for line in build_report(package).splitlines() if "budget=16" in line and "|" in line
    ]
    row = row.replace("\\", "")
    assert (
        "rolled back**: illegal_memory_access during decoding; Xid 31 on GPU 0 at 12:01:06" in row
    )
    assert "; at ready: GPU 0 70.1 of 80 GiB" in row
    plain = Experiment("b300", "u", "s", "f", "kept", Side("a", {}), Side("b", {}))
    assert "xids" not in plain.record() and "gpu_memory" not in plain.record()  # ids unchanged
