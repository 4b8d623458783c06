"""The findings report: what a reproduction package shows, written as `REPORT.md` inside it.

A campaign used to end with a report typed by hand from `jq` over bench JSONs and `grep` over
journal excerpts, and a hand-computed speedup is how "2.15×" got written for 303/133 tok/s.
This builds the report from the package alone, per host and SGLang release:

- the configurations tried, with their outcome: each snapshot's service state and the crash
  signatures of its journal excerpt (with the phase the server was in and the line), each
  bench file measured or a crashed run (no results);
- accept-length statistics (each snapshot's invocation, each bench point; `bench_serving`'s
  is labelled as the server's average since start or the last `/flush_cache`);
- every bench matrix with the exact speedup over the baseline (the autoregressive run);
- the best stable configuration: highest throughput at the lowest concurrency measured, among
  files with results whose configuration no snapshot saw crash;
- each tuning campaign's grid, its best stable cell and its crash boundary
  (console/findings/campaign_report.py);
- each group rollout: every host's change, outcome and accept length, and the fleet's line
  (console/findings/rollout_report.py);
- a relative link to the file behind every number.

Past 500 lines because its sections share one writer, one ordering and
one collection of the package's evidence; a section that needs no more than lines and links
(the campaigns, the group rollouts) lives in a module of its own.

Nothing in it depends on the clock or the order a directory lists in: the same package gives
byte-identical Markdown. Reads local files only; no Textual.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from console.findings.bench import (
    SERVING_ACCEPT_NOTE,
    BenchFile,
    Row,
    choose_baseline,
    read_bench,
    speedup_table,
)
from console.findings.bench_files import (
    bench_paths,
    fetched_by,
    snapshot_config,
    snapshot_records,
    with_package_config,
)
from console.findings.bench_matrix import ConfigValue
from console.findings.bench_view import CRASHED_TEXT, config_text, speedup_text
from console.findings.campaign_report import campaign_lines
from console.findings.compare import Configuration, config_key, configurations
from console.findings.compare import best as best_configuration
from console.findings.rollout_report import rollout_lines
from console.findings.snapshot_crashes import Crash, snapshot_crashes
from console.ledger.campaigns import CAMPAIGNS_DIR, Campaign
from console.ledger.ledger import EXPERIMENTS_DIR, Experiment
from console.ledger.ledger import load as load_experiments
from console.local.files import publish_replacing, write_file
from console.package.manifest import refresh_manifest

REPORT_NAME = "REPORT.md"
BENCH_DIR = "bench"
_UNKNOWN = "release not recorded in the package"


@dataclass
class HostEvidence:
    host: str
    bench: list[tuple[str, BenchFile]] = field(default_factory=list)
    """(package path, parsed file), by path."""
    snapshots: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    experiments: list[tuple[str, Experiment]] = field(default_factory=list)
    """(package path, experiment) from the ledger mirrored into `experiments/HOST/`."""
    campaigns: list[tuple[str, Campaign]] = field(default_factory=list)
    """(package path, campaign record) mirrored into `campaigns/HOST/`."""


_MD_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_MD_SPECIAL = str.maketrans({"<": "&lt;", ">": "&gt;", "[": "\\[", "]": "\\]", "`": "\\`"})


def _md(text: object) -> str:
    """Text from the evidence as inert Markdown: it can neither break a table (`|`, a line
    break) nor become a link, an image, code or HTML (`<script>` from a crafted bench
    file's metadata); control characters are dropped."""
    cleaned = _MD_CONTROL.sub("", str(text)).translate(_MD_SPECIAL)
    return cleaned.replace("|", "\\|").replace("\n", " ")


def _code(text: str) -> str:
    """`text` as an inline code span in a table cell (a backtick in it would end the span:
    it becomes a quote; HTML and links are inert in code already)."""
    cleaned = _MD_CONTROL.sub("", text).replace("`", "'")
    return "`" + cleaned.replace("|", "\\|").replace("\n", " ") + "`"


def _fmt(value: float) -> str:
    return f"{value:.2f}" if abs(value) < 100 else f"{value:.0f}"


def collect(package: Path) -> dict[str, HostEvidence]:
    """The package's evidence by host: bench files under `bench/results_HOST/`, snapshots."""
    hosts: dict[str, HostEvidence] = {}
    owners = fetched_by(package)
    bench_root = package / BENCH_DIR
    paths = bench_paths([bench_root]) if bench_root.is_dir() else []
    for path in paths:
        rel = path.relative_to(package).as_posix()
        parts = rel.split("/")
        host = parts[1].removeprefix("results_") if len(parts) > 2 else "unknown host"
        bench = with_package_config(read_bench(path), owners, rel, package)
        hosts.setdefault(host, HostEvidence(host)).bench.append((rel, bench))
    for rel, record in snapshot_records(package):
        host = str(record.get("host") or "unknown host")
        hosts.setdefault(host, HostEvidence(host)).snapshots.append((rel, record))
    ledgers = package / EXPERIMENTS_DIR
    for directory in sorted(d for d in ledgers.iterdir() if d.is_dir()) if ledgers.is_dir() else []:
        for path, experiment in load_experiments(directory.name, directory):
            rel = path.relative_to(package).as_posix()
            # The directory names the host as the package does; the record names it as the
            # console that made the change did (another profile name for the same host).
            host = directory.name
            hosts.setdefault(host, HostEvidence(host)).experiments.append((rel, experiment))
    for host, rel, campaign in read_campaigns(package):
        hosts.setdefault(host, HostEvidence(host)).campaigns.append((rel, campaign))
    return dict(sorted(hosts.items()))


def read_campaigns(package: Path) -> list[tuple[str, str, Campaign]]:
    """(host, package path, record) of every campaign under `campaigns/HOST/`; a file that is
    no campaign record is left out."""
    found: list[tuple[str, str, Campaign]] = []
    for path in sorted((package / CAMPAIGNS_DIR).glob("*/*.json")):
        try:
            campaign = Campaign.from_record(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError, KeyError, TypeError):
            continue
        found.append((path.parent.name, path.relative_to(package).as_posix(), campaign))
    return found


def _release(bench: BenchFile) -> str | None:
    version = bench.config.get("version")
    return str(version) if version else None


def _by_release(evidence: HostEvidence) -> dict[str, list[tuple[str, BenchFile]]]:
    known = sorted(
        {r for _, b in evidence.bench if (r := _release(b))}
        | {e.release for _, e in evidence.experiments if e.release}
    )
    groups: dict[str, list[tuple[str, BenchFile]]] = {}
    for rel, bench in evidence.bench:
        release = _release(bench) or (known[0] if len(known) == 1 else _UNKNOWN)
        groups.setdefault(release, []).append((rel, bench))
    if not groups:
        groups[known[0] if len(known) == 1 else _UNKNOWN] = []
    return dict(sorted(groups.items(), key=lambda kv: (kv[0] == _UNKNOWN, kv[0])))


def _same_setup(config: Mapping[str, ConfigValue], flags: Mapping[str, ConfigValue]) -> bool:
    shared = [k for k in config if k in flags and k not in ("host", "variant")]
    return len(shared) >= 2 and all(config[k] == flags[k] for k in shared)


class _Writer:
    """Markdown lines, and links to package paths from where the report is written."""

    def __init__(self, prefix: str, paths: Mapping[int, str]) -> None:
        self.prefix = prefix
        """The package directory relative to the report's own ("" when it is inside)."""
        self.paths = paths
        """`id(BenchFile)` → its package path."""
        self.lines: list[str] = []

    def add(self, *lines: str) -> None:
        self.lines.extend(lines)

    def link(self, path: str, anchor: str = "") -> str:
        target = (self.prefix + path).replace(" ", "%20")
        return f"[{_md(path)}{anchor}]({target}{anchor})"

    def link_to(self, evidence: str) -> str:
        """A link to `path#Lnn` (or a plain path)."""
        path, _, anchor = evidence.partition("#")
        return self.link(path, f"#{anchor}" if anchor else "")

    def bench_link(self, bench: BenchFile) -> str:
        return self.link(self.paths[id(bench)])

    def table(self, header: Sequence[str], rows: Iterable[Sequence[str]]) -> None:
        self.add("| " + " | ".join(header) + " |", "|" + "---|" * len(header))
        self.add(*("| " + " | ".join(row) + " |" for row in rows))
        self.add("")


def _snapshot_outcome(record: Mapping[str, Any], crashes: Sequence[Crash]) -> str:
    state = f"{record.get('active_state', '?')}/{record.get('sub_state', '?')}"
    restarts = record.get("n_restarts")
    text = f"service {state}, NRestarts {restarts}"
    own = [c for c in crashes if not c.earlier]
    earlier = len(crashes) - len(own)
    before = f"; {earlier} crash(es) of earlier runs in the excerpt" if earlier else ""
    if own:
        first = own[0]
        more = f" (+{len(own) - 1} more)" if len(own) > 1 else ""
        return f"**crashed**: {first.signature} during {first.phase}{more}; {text}{before}"
    return f"ran, no crash signature in this run's journal; {text}{before}"


def _experiment_outcome(experiment: Experiment) -> str:
    accept = experiment.after.windows.get("accept_len")
    tput = experiment.after.windows.get("gen_throughput")
    numbers = []
    if accept is not None:
        numbers.append(f"accept {_fmt(accept.mean)} ± {_fmt(accept.stddev)} (n={accept.count})")
    if tput is not None:
        numbers.append(f"{_fmt(tput.mean)} tok/s")
    measured = f"; {', '.join(numbers)}" if numbers else ""
    if experiment.kept:
        return f"kept{measured}"
    why = experiment.signature or experiment.reason or experiment.outcome
    phase = f" during {experiment.phase}" if experiment.signature and experiment.phase else ""
    gpus = "".join(f"; {xid}" for xid in experiment.xids)  # the driver's side of the crash
    if experiment.gpu_memory:
        gpus += f"; at ready: {experiment.gpu_memory}"
    return f"**{experiment.outcome.replace('_', ' ')}**: {why}{phase}{gpus}{measured}"


def _ledger_best(
    w: _Writer,
    experiments: Sequence[tuple[str, Experiment]],
    configs: Sequence[Configuration],
) -> None:
    """From the ledger: the fastest configuration no experiment rolled back, and the ones
    that were (never best, whatever their numbers)."""
    if not configs:
        return
    top = best_configuration(configs)
    if top is None:
        w.add("From the experiment ledger: no configuration with throughput that stayed.", "")
    else:
        runs = top.invocations
        links = ", ".join(dict.fromkeys(w.link(experiments[r.experiment - 1][0]) for r in runs))
        tput, accept = top.window("gen_throughput"), top.window("accept_len")
        text = f"From the experiment ledger: **{_md(top.key)}**"
        if tput is not None:
            text += f", {_fmt(tput.mean)} ± {_fmt(tput.stddev)} tok/s (n={tput.count})"
        if accept is not None:
            text += f", accept {_fmt(accept.mean)} ± {_fmt(accept.stddev)} (n={accept.count})"
        w.add(f"{text} — {links}", "")
    for config in configs:
        if config.rolled_back:
            w.add(f"- not a candidate: {_md(config.key)}, {_md(config.status)}")
    w.add("")


def _configurations(
    w: _Writer,
    files: Sequence[tuple[str, BenchFile]],
    snapshots: Sequence[tuple[str, dict[str, Any], list[Crash]]],
    experiments: Sequence[tuple[str, Experiment]] = (),
) -> None:
    w.add("### Configurations tried", "")
    rows: list[list[str]] = []
    now = {c.key: c for c in configurations([e for _, e in experiments])}
    for rel, experiment in experiments:
        before, after = config_key(experiment.before.flags), config_key(experiment.after.flags)
        change = f"change: {_md(before)} → {_md(after)}"
        outcome = _experiment_outcome(experiment)
        # One outcome per configuration: where a later experiment decided otherwise (kept,
        # then rolled back; rolled back, then chosen again), the row says what it is now.
        if now[after].rolled_back == experiment.kept:
            outcome += f"; now: {now[after].status}"
        rows.append([change, _md(outcome), w.link(rel)])
    for rel, record, crashes in snapshots:
        config = config_text(snapshot_config(record)) or "unknown"
        outcome = _md(_snapshot_outcome(record, crashes))
        rows.append([f"snapshot: {_md(config)}", outcome, w.link(rel)])
        for crash in crashes:
            whose = "an earlier run: " if crash.earlier else ""
            rows.append(["", whose + _code(crash.line[:160]), w.link_to(crash.evidence)])
    for rel, bench in files:
        config = _md(config_text(bench.config) or "unknown")
        if bench.crashed:
            outcome = f"**{CRASHED_TEXT}** ({bench.size} bytes; {_md(bench.detail)})"
        else:
            outcome = f"measured: {len(bench.points)} point(s), {bench.shape.value}"
        rows.append([f"bench {_md(bench.label)}: {config}", outcome, w.link(rel)])
    w.table(["configuration", "outcome", "evidence"], rows)


def _accept(
    w: _Writer,
    files: Sequence[tuple[str, BenchFile]],
    snapshots: Sequence[tuple[str, dict[str, Any], list[Crash]]],
    experiments: Sequence[tuple[str, Experiment]] = (),
) -> None:
    rows: list[list[str]] = []
    for rel, experiment in experiments:
        for role, side in (("before", experiment.before), ("after", experiment.after)):
            stats = side.windows.get("accept_len")
            if stats is None:
                continue
            cells = [_fmt(v) for v in (stats.mean, stats.p50, stats.min, stats.max)]
            source = f"change {role}: {_md(config_key(side.flags))} ({_md(side.window)})"
            rows.append([source, str(stats.count), *cells, "–", w.link(rel)])
    for rel, record, _ in snapshots:
        stats = record.get("statistics", {}).get("accept_len")
        if isinstance(stats, dict) and stats.get("count"):
            cells = [_fmt(float(stats.get(k, 0))) for k in ("mean", "p50", "min", "max", "last")]
            variant = record.get("variant") or "?"
            source = f"snapshot {_md(variant)}: its invocation's decode lines"
            rows.append([source, str(stats["count"]), *cells, w.link(rel)])
    noted = False
    for rel, bench in files:
        for p in bench.points:
            if p.accept_length is None:
                continue
            note = " *" if p.accept_note == SERVING_ACCEPT_NOTE else ""
            noted = noted or bool(note)
            where = f"{_cell_name(p.context, p.concurrency)}{note}"
            value = _fmt(p.accept_length)
            rows.append([f"bench {_md(bench.label)} {where}", "1", *[value] * 5, w.link(rel)])
    if not rows:
        return
    w.add("### Accept length", "")
    w.table(["source", "n", "mean", "p50", "min", "max", "last", "evidence"], rows)
    if noted:
        w.add(f"\\* `bench_serving`'s accept length: {SERVING_ACCEPT_NOTE}.", "")


def _cell_name(context: int | None, concurrency: int | None) -> str:
    ctx = str(context) if context is not None else "–"
    return f"ctx {ctx}, C={concurrency if concurrency is not None else '–'}"


def _matrices(
    w: _Writer,
    files: Sequence[tuple[str, BenchFile]],
    rows: Sequence[Row],
    baseline: BenchFile | None,
) -> None:
    measured = [(rel, b) for rel, b in files if not b.crashed]
    if not measured:
        return
    w.add("### Bench results", "")
    if baseline is not None:
        label = _md(baseline.label)
        w.add(f"Speedup against **{label}** ({w.bench_link(baseline)}), cell by cell.", "")
    else:
        w.add("No autoregressive baseline in this package: no speedups.", "")
    for rel, bench in measured:
        mine = [r for r in rows if r.file is bench]
        contexts = sorted({r.point.context for r in mine}, key=lambda c: (c is not None, c or 0))
        concs = sorted({r.point.concurrency for r in mine}, key=lambda c: (c is not None, c or 0))
        cells = {r.point.cell: r for r in mine}
        w.add(f"**{_md(bench.label)}** ({bench.shape.value}) — {w.link(rel)}", "")
        table_rows = []
        for context in contexts:
            out = [str(context) if context is not None else "–"]
            for conc in concs:
                row = cells.get((context, conc))
                if row is None or row.point.throughput is None:
                    out.append("")
                    continue
                text = f"{_fmt(row.point.throughput)} tok/s"
                if row.speedup is not None:
                    text += f" ({speedup_text(row.speedup)})"
                if row.point.accept_length is not None:
                    text += f", accept {_fmt(row.point.accept_length)}"
                out.append(text)
            table_rows.append(out)
        w.table(["context", *(f"C={c}" if c is not None else "C=–" for c in concs)], table_rows)


def _best(
    w: _Writer,
    files: Sequence[tuple[str, BenchFile]],
    rows: Sequence[Row],
    baseline: BenchFile | None,
    snapshots: Sequence[tuple[str, dict[str, Any], list[Crash]]],
    experiments: Sequence[tuple[str, Experiment]] = (),
) -> None:
    configs = configurations([e for _, e in experiments])
    crashed_flags = [
        snapshot_config(r) for _, r, crashes in snapshots if any(not c.earlier for c in crashes)
    ]
    crashed_flags += [dict(c.flags) for c in configs if c.rolled_back]
    stable = [
        r
        for r in rows
        if r.file is not baseline
        and not r.file.autoregressive
        and r.point.throughput is not None
        and not any(_same_setup(r.file.config, f) for f in crashed_flags)
    ]
    w.add("### Best stable configuration", "")
    _ledger_best(w, experiments, configs)
    if not stable:
        if not configs:
            w.add("No measured configuration besides the baseline.", "")
        return
    # Only like is compared with like: measurements with a baseline cell beat those without,
    # and a known concurrency beats an unknown one (a summary file's batch of 32 is not C=1).
    candidates = [r for r in stable if r.speedup is not None] or stable
    candidates = [r for r in candidates if r.point.concurrency is not None] or candidates
    lowest = min(r.point.concurrency or 0 for r in candidates)
    at_lowest = [r for r in candidates if (r.point.concurrency or 0) == lowest]
    best = max(at_lowest, key=lambda r: (r.point.throughput or 0.0, r.file.label))
    where = (
        f"C={best.point.concurrency}" if best.point.concurrency is not None else "its concurrency"
    )
    if best.point.context is not None:
        where += f", context {best.point.context}"
    config = _md(config_text(best.file.config) or "configuration unknown")
    tput = _fmt(best.point.throughput or 0.0)
    text = f"**{_md(best.file.label)}** ({config}): {tput} tok/s at {where}"
    if best.speedup is not None and best.baseline is not None and baseline is not None:
        base_tput = _fmt(best.baseline.throughput or 0.0)
        text += f", **{speedup_text(best.speedup)}** over {_md(baseline.label)} ({base_tput} tok/s)"
    if best.point.accept_length is not None:
        text += f", accept {_fmt(best.point.accept_length)}"
    w.add(text + f" — {w.bench_link(best.file)}", "")
    per_conc: dict[int | None, Row] = {}
    for r in sorted(stable, key=_rank):
        per_conc.setdefault(r.point.concurrency, r)
    w.table(
        ["concurrency", "best", "tok/s", "speedup", "evidence"],
        [
            [
                str(c) if c is not None else "–",
                _md(r.file.label),
                _fmt(r.point.throughput or 0.0),
                speedup_text(r.speedup),
                w.bench_link(r.file),
            ]
            for c, r in per_conc.items()
        ],
    )
    w.add("Crashed runs and configurations a snapshot saw crash are left out.", "")


def _rank(row: Row) -> tuple[int, float, str]:
    return (row.point.concurrency or 0, -(row.point.throughput or 0.0), row.file.label)


def build_report(package: Path, out: Path | None = None) -> str:
    """The report's Markdown for `package`; links are relative to `out`'s directory."""
    package = package.absolute()
    target = (out or package / REPORT_NAME).absolute()
    base = Path(os.path.relpath(package, target.parent)).as_posix()
    evidence = collect(package)
    paths = {id(b): rel for found in evidence.values() for rel, b in found.bench}
    w = _Writer("" if base == "." else base + "/", paths)
    w.add(
        f"# Findings: {package.name}",
        "",
        "Written by `specops report` from the evidence in this package alone; every number links "
        "to the file it comes from, and the same package gives this same file byte for byte.",
        "",
    )
    if not evidence:
        w.add("The package holds no bench file, snapshot or experiment.", "")
    for host, found in evidence.items():
        snapshots = snapshot_crashes(package, found.snapshots)
        groups = _by_release(found)
        for i, (release, files) in enumerate(groups.items()):
            title = f"SGLang {_md(release)}" if release != _UNKNOWN else f"SGLang {_UNKNOWN}"
            w.add(f"## {_md(host)} · {title}", "")
            benches = [b for _, b in files]
            baseline = choose_baseline(benches) or choose_baseline([b for _, b in found.bench])
            rows = speedup_table(benches, baseline)
            # An experiment sits with its release; one that recorded none, with the first.
            experiments = [
                (rel, e)
                for rel, e in found.experiments
                if e.release == release or ((e.release not in groups) and i == 0)
            ]
            _configurations(w, files, snapshots, experiments)
            _accept(w, files, snapshots, experiments)
            _matrices(w, files, rows, baseline)
            _best(w, files, rows, baseline, snapshots, experiments)
        w.add(*campaign_lines(host, found.campaigns, w.link, _md))
    records = [(host, rel, e) for host, found in evidence.items() for rel, e in found.experiments]
    w.add(*rollout_lines(records, w.link, _md))
    return "\n".join(w.lines).rstrip("\n") + "\n"


def write_report(package: Path, target: Path | None = None) -> tuple[bool, bool]:
    """Write the report to `target` (default PACKAGE/REPORT.md) atomically, only if its bytes
    changed; refresh the manifest when it lies in the package. (report written, manifest
    written)."""
    target = target or package / REPORT_NAME
    content = build_report(package, target).encode()
    try:
        changed = target.read_bytes() != content
    except FileNotFoundError:
        changed = True
    if changed:
        write_file(target, content, publish_replacing, suffix=".part", mode=0o644)
    inside = target.absolute().is_relative_to(package.absolute())
    manifest = refresh_manifest(package).written if inside else False
    return changed, manifest
