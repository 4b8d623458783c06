"""Which files are bench results, and what a package knows about the configuration of each.

`specops bench PATH...` takes files and directories; a directory means every `*.json` and
`*.jsonl` under it (a package's `bench/`, a host's `bench_results_opt/`), skipping `.part`
files still being written. A file inside a reproduction package that does not say what it
was measured with gets the flags of the snapshot that fetched it (`snapshots/*.json` lists
every artifact it placed), labelled as such: those are the service's flags when the file was
fetched, which is when it was measured only if nothing changed in between.

Reads local files only; no Textual.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from console.findings.bench import BenchFile, read_bench
from console.findings.bench_matrix import ConfigValue, is_scalar
from console.ledger.ledger import EXPERIMENTS_DIR, Experiment, running_at
from console.ledger.ledger import load as load_experiments
from console.package.layout import SNAPSHOTS_DIR
from console.package.manifest import MANIFEST_NAME, PART_SUFFIX

BENCH_SUFFIXES = (".json", ".jsonl")


def bench_paths(paths: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """The files named, and the bench files under each directory named, in a stable order.

    FileNotFoundError names a path that does not exist.
    """
    found: list[Path] = []
    for raw in paths:
        path = Path(raw).expanduser()
        if path.is_dir():
            found.extend(
                p
                for p in sorted(path.rglob("*"))
                if p.is_file()
                and p.suffix in BENCH_SUFFIXES
                and not p.name.endswith(PART_SUFFIX)
                and SNAPSHOTS_DIR not in p.relative_to(path).parts
            )
        elif path.is_file():
            found.append(path)
        else:
            raise FileNotFoundError(f"{path}: no such file or directory")
    return list(dict.fromkeys(found))


def package_root(path: Path) -> Path | None:
    """The reproduction package `path` lies in: the nearest parent with a manifest and
    a snapshots directory."""
    for parent in path.absolute().parents:
        if (parent / MANIFEST_NAME).is_file() and (parent / SNAPSHOTS_DIR).is_dir():
            return parent
    return None


def snapshot_records(package: Path) -> list[tuple[str, dict[str, Any]]]:
    """(relative path, record) of every snapshot metadata file, oldest name first."""
    found: list[tuple[str, dict[str, Any]]] = []
    for meta in sorted((package / SNAPSHOTS_DIR).glob("*.json")):
        try:
            record = json.loads(meta.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(record, dict):
            found.append((meta.relative_to(package).as_posix(), record))
    return found


def fetched_by(package: Path) -> dict[str, tuple[str, dict[str, Any]]]:
    """Package path of each artifact → (the first snapshot that lists it, that record)."""
    owners: dict[str, tuple[str, dict[str, Any]]] = {}
    for rel, record in snapshot_records(package):
        for artifact in record.get("artifacts", []):
            if isinstance(artifact, dict) and isinstance(artifact.get("path"), str):
                owners.setdefault(artifact["path"], (rel, record))
    return owners


def snapshot_config(record: Mapping[str, Any]) -> dict[str, ConfigValue]:
    """The flag values a snapshot recorded, with its host and variant."""
    config: dict[str, ConfigValue] = {}
    for key in ("host", "variant"):
        if isinstance(record.get(key), str):
            config[key] = record[key]
    flags = record.get("flags")
    if isinstance(flags, dict):
        config.update((str(k), v) for k, v in flags.items() if is_scalar(v))
    return config


def with_ledger_config(
    bench: BenchFile,
    host: str,
    experiments: Sequence[tuple[str, Experiment]],
    mtime: float | None,
) -> BenchFile | None:
    """`bench` with the configuration the host's experiment ledger says ran at `mtime` (the
    file's), or None when the ledger cannot say."""
    found = running_at(experiments, mtime) if mtime is not None else None
    if found is None:
        return None
    path, flags = found
    config = {"host": host, **{k: v for k, v in flags.items() if is_scalar(v)}}
    return bench.with_config(config, f"{path} (the ledger: running at the file's mtime)")


def with_package_config(
    bench: BenchFile,
    owners: Mapping[str, tuple[str, dict[str, Any]]],
    rel: str,
    package: Path | None = None,
) -> BenchFile:
    """`bench`, given a configuration when the file itself names none: the one the package's
    experiment ledger says ran on its host at the file's mtime, else the flags of the snapshot
    that fetched it."""
    if bench.config:
        return bench
    parts = rel.split("/")
    if package is not None and len(parts) > 2 and parts[0] == "bench":
        host = parts[1].removeprefix("results_")
        experiments = [
            (p.relative_to(package).as_posix(), e)
            for p, e in load_experiments(host, package / EXPERIMENTS_DIR / host)
        ]
        try:
            mtime: float | None = (package / rel).stat().st_mtime
        except OSError:
            mtime = None
        matched = with_ledger_config(bench, host, experiments, mtime)
        if matched is not None:
            return matched
    if rel not in owners:
        return bench
    meta, record = owners[rel]
    return bench.with_config(snapshot_config(record), f"{meta} (service flags when fetched)")


def load_bench(paths: Sequence[str | os.PathLike[str]]) -> list[BenchFile]:
    """Every bench file under `paths`, parsed, with package configurations filled in."""
    files: list[BenchFile] = []
    owners_by_package: dict[Path, dict[str, tuple[str, dict[str, Any]]]] = {}
    for path in bench_paths(paths):
        bench = read_bench(path)
        package = package_root(path)
        if package is not None:
            if package not in owners_by_package:
                owners_by_package[package] = fetched_by(package)
            rel = path.absolute().relative_to(package).as_posix()
            bench = with_package_config(bench, owners_by_package[package], rel, package)
        files.append(bench)
    return files
