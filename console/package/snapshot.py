"""One-key snapshot of the evidence on each host into the reproduction package.

Every host runs at once, on its own: connect, read the unit (`systemctl show` and `cat`: the
flags and the variant), read the journal window (the excerpt) and the current invocation's
journal (accept-length statistics), write the generated files, fetch the bench files, write
the metadata. Each step reports a `SnapshotProgress`. A failure ends that host only and is
named in its result; the files it did complete stay, and it gets no metadata file (that would
claim a complete snapshot). When every host is done, each package's manifest is regenerated.

What goes where, and the checks made before any host is contacted (`plan`), are in
console/package/layout.py; how a file gets in without ever being half-written or replaced is in
console/package/transfer.py. Past 500 lines because one host's snapshot is
one sequence of steps (`_HostSnapshot.run`) read top to bottom; the pieces it calls live in
their own modules (excerpt, bench globs, transfer, gpus_file).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import posixpath
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

import asyncssh

from console.hosts.events import JournalEntry, SnapshotProgress, SnapshotStage
from console.hosts.profiles import FlagValue
from console.ledger.campaigns import CAMPAIGNS_DIR, campaign_path, campaigns_dir
from console.ledger.campaigns import load_all as load_campaigns
from console.ledger.campaigns import text_of as campaign_text
from console.ledger.ledger import EXPERIMENTS_DIR, load_from_host, text_of
from console.local.redaction import REDACTED, is_secret_name, redact_text
from console.package.bench_globs import Bench, bench_files, host_glob
from console.package.digests import HostDigests
from console.package.excerpt import Excerpt, build_excerpt
from console.package.gpus_file import gpus_json
from console.package.layout import (
    EXCERPT_NAME,
    EXECSTART_NAME,
    FORMAT,
    GPUS_NAME,
    SERVICES_DIR,
    Artifact,
    Job,
    execstart_text,
    refetch_command,
    refetch_file,
    service_file_name,
    ssh_target,
    write_metadata,
)
from console.package.manifest import MANIFEST_NAME, package_files, write_manifest
from console.package.names import shown
from console.package.transfer import (
    FileJob,
    Outcome,
    Placement,
    TransferError,
    fetch,
    run_bounded,
    write_bytes,
)
from console.service.execline import FlagError
from console.service.flags import format_variant, read_flags
from console.service.status import read_status
from console.service.unit import effective_service
from console.service.version import read_version
from console.transport import remote
from console.transport.ssh import CommandFailed, ConnState, HostSession, RemoteError
from console.watch.journal import decode_lines
from console.watch.metrics import HostMetrics
from console.watch.sglang import parse_line

log = logging.getLogger(__name__)

OnProgress = Callable[[SnapshotProgress], None]


class HostOutcome(StrEnum):
    OK = "ok"
    FAILED = "failed"
    UNREACHABLE = "unreachable"


@dataclass
class HostSnapshot:
    host: str
    package: Path
    outcome: HostOutcome = HostOutcome.OK
    artifacts: list[Artifact] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    """What failed, each naming the file or step."""
    notes: list[str] = field(default_factory=list)
    """Worth knowing but not a failure (a bench glob that matched nothing)."""
    metadata: Artifact | None = None

    def count(self, outcome: Outcome) -> tuple[int, int]:
        """(files, bytes) of the artifacts with this outcome, metadata included."""
        files = [a for a in (*self.artifacts, self.metadata) if a and a.outcome is outcome]
        return len(files), sum(a.size for a in files)


@dataclass(frozen=True)
class PackageResult:
    path: Path
    manifest_updated: bool
    files: int
    """Files the manifest lists."""
    error: str | None = None


@dataclass
class SnapshotReport:
    hosts: list[HostSnapshot]
    packages: list[PackageResult]

    @property
    def ok(self) -> bool:
        return all(h.outcome is HostOutcome.OK for h in self.hosts) and not any(
            p.error for p in self.packages
        )

    @property
    def unreachable(self) -> bool:
        return any(h.outcome is HostOutcome.UNREACHABLE for h in self.hosts)


# --- per host ------------------------------------------------------------------------------


class _Tracker:
    """Counts files and bytes of one host's snapshot and reports each change."""

    def __init__(self, host: str, on_progress: OnProgress | None) -> None:
        self.host = host
        self._on_progress = on_progress
        self.stage = SnapshotStage.CONNECTING
        self.files_done = self.files_total = self.bytes_done = self.bytes_total = 0
        self.current = ""

    def emit(self, stage: SnapshotStage | None = None, current: str | None = None) -> None:
        if stage is not None:
            self.stage = stage
        if current is not None:
            self.current = current
        if self._on_progress is not None:
            self._on_progress(
                SnapshotProgress(
                    self.host,
                    self.stage,
                    self.files_done,
                    self.files_total,
                    self.bytes_done,
                    self.bytes_total,
                    self.current,
                )
            )

    def placed(self) -> None:
        self.files_done += 1
        self.emit()

    def transferred(self, n: int) -> None:
        self.bytes_done += n
        self.emit()


async def _journal(session: HostSession, command: remote.Command) -> list[JournalEntry]:
    """The entries a one-shot `journalctl -o json` read returns (one per journal line)."""
    result = await session.run(command, check=False, timeout=300)
    # Older journalctl exits 1 when nothing matched; that is an empty read, not a failure.
    if result.returncode not in (0, 1) or (result.returncode == 1 and result.stderr.strip()):
        raise CommandFailed(session.name, result)
    return decode_lines(session.name, result.stdout.splitlines())


def _stats(entries: Sequence[JournalEntry], invocation: str) -> dict[str, Any]:
    metrics = HostMetrics()
    metrics.new_invocation(invocation)
    for entry in entries:
        metrics.observe(parse_line(entry.message), entry.timestamp)
    found: dict[str, Any] = {}
    for name in ("accept_len", "accept_rate", "gen_throughput"):
        stats = metrics.invocation_stats(name)
        if stats is not None:
            found[name] = {k: round(v, 4) for k, v in asdict(stats).items()}
    return found


class _HostRun:
    """Collects one host's snapshot; each step adds to `result`."""

    def __init__(self, job: Job, session: HostSession, tracker: _Tracker) -> None:
        self.job = job
        self.profile = job.profile
        self.session = session
        self.tracker = tracker
        self.result = HostSnapshot(job.profile.name, job.package)

    def _rel(self, path: Path) -> str:
        return path.relative_to(self.job.package).as_posix()

    def _add(self, placement: Placement, source: str, refetch: str) -> Artifact:
        artifact = Artifact(
            self._rel(placement.path),
            placement.sha256,
            placement.size,
            placement.outcome,
            source,
            refetch,
        )
        self.result.artifacts.append(artifact)
        self.tracker.placed()
        return artifact

    async def _write(self, directory: Path, name: str, text: str) -> Placement:
        self.tracker.emit(current=self._rel(directory / name))
        return await asyncio.to_thread(write_bytes, directory, name, text.encode())

    async def run(self) -> None:
        profile, session, tracker, pkg = self.profile, self.session, self.tracker, self.job.package
        host, unit, art = profile.name, profile.service.unit, profile.artifacts

        tracker.emit(SnapshotStage.UNIT)
        status = await read_status(session, with_flags=False)
        cat_cmd = remote.systemctl_cat(unit)
        cat = (await session.run(cat_cmd, timeout=30)).stdout
        service = effective_service(cat)
        flags: dict[str, FlagValue] = dict(
            read_flags(profile.flags, service.argv, service.environment)
        )
        variant = format_variant(art.variant, flags)
        secret = profile.secret_names
        # The package is shared: every file in it goes through the one redaction.
        unit_text = redact_text(cat if cat.endswith("\n") else cat + "\n", secret)
        sglang = await read_version(session, service.argv[0]) if service.argv else None

        tracker.emit(SnapshotStage.JOURNAL)
        window_cmd = remote.journal_read(unit, since=art.journal_since)
        excerpt: Excerpt = build_excerpt(
            await _journal(session, window_cmd),
            host=host,
            unit=unit,
            command=window_cmd.shell(profile.ssh.sudo),
            since=art.journal_since,
            patterns=profile.journal.patterns,
            context=art.crash_context_lines,
            limit=art.journal_lines,
        )
        invocation: dict[str, Any] = {"id": status.invocation_id}
        stats: dict[str, Any] = {}
        if status.invocation_id:
            inv_cmd = remote.journal_read(
                unit, invocation=status.invocation_id, fields=("MESSAGE",)
            )
            inv_entries = await _journal(session, inv_cmd)
            stats = _stats(inv_entries, status.invocation_id)
            invocation.update(
                entries=len(inv_entries),
                first_cursor=inv_entries[0].cursor if inv_entries else None,
                last_cursor=inv_entries[-1].cursor if inv_entries else None,
                read_with=inv_cmd.shell(profile.ssh.sudo),
            )

        gpus = await gpus_json(session, profile, self.result.notes)

        tracker.emit(SnapshotStage.TRANSFER)
        async with session.sftp() as sftp:
            bench = await bench_files(session, sftp, art, self.result)
            tracker.files_total = len(bench) + 3 + (gpus is not None)
            tracker.bytes_total = sum(b.size for b in bench)
            logs = pkg / f"{host}_logs"
            unit_ref = refetch_command(profile, cat_cmd)
            excerpt_file = self._add(
                await self._write(logs, EXCERPT_NAME, redact_text(excerpt.text, secret)),
                window_cmd.shell(profile.ssh.sudo),
                refetch_command(profile, window_cmd),
            )
            self._add(
                await self._write(
                    logs, EXECSTART_NAME, redact_text(execstart_text(host, unit, service), secret)
                ),
                cat_cmd.shell(profile.ssh.sudo),
                unit_ref,
            )
            name = service_file_name(profile, variant)
            self._add(
                await self._write(pkg / SERVICES_DIR, name, unit_text),
                cat_cmd.shell(profile.ssh.sudo),
                unit_ref,
            )
            gpus_file = None
            if gpus is not None:
                text, command = gpus
                gpus_file = self._add(
                    await self._write(logs, GPUS_NAME, text),
                    command.shell(profile.ssh.sudo),
                    refetch_command(profile, command),
                )
            await self._fetch_bench(sftp, bench)
            await self._fetch_campaign_bench(sftp)
        await self._mirror_experiments()
        await self._mirror_campaigns()

        if self.result.errors:
            return
        tracker.emit(SnapshotStage.METADATA)
        journal = {
            "since": art.journal_since,
            "read_with": window_cmd.shell(profile.ssh.sudo),
            "first_cursor": excerpt.first_cursor,
            "last_cursor": excerpt.last_cursor,
            "entries_read": excerpt.entries_read,
            "records_kept": excerpt.records_kept,
            "crash_signatures": list(excerpt.crashes),
            # Files are never replaced, so a changed excerpt is kept beside the first one as
            # `journal_excerpt.<sha256 prefix>.txt` and the plain name is the oldest: each
            # snapshot names the excerpt it saw, and the newest snapshot the newest one.
            "excerpt": excerpt_file.path,
        }
        body = {
            "format": FORMAT,
            "host": host,
            "ssh": f"{ssh_target(profile)}:{profile.ssh_port}",
            "unit": unit,
            "active_state": status.active_state,
            "sub_state": status.sub_state,
            "n_restarts": status.n_restarts,
            "sglang_version": sglang,
            "invocation": invocation,
            "variant": redact_text(variant, secret),
            "flags": {
                k: REDACTED if v is not None and is_secret_name(k, secret) else v
                for k, v in flags.items()
            },
            "statistics": stats,
            "journal": journal,
            "gpus": gpus_file.path if gpus_file is not None else None,
            "artifacts": [
                {
                    "path": a.path,
                    "sha256": a.sha256,
                    "bytes": a.size,
                    "source": a.source,
                    "refetch": a.refetch,
                }
                for a in sorted(self.result.artifacts, key=lambda a: a.path)
            ],
            "notes": self.result.notes,
        }
        self.result.metadata = await asyncio.to_thread(write_metadata, pkg, host, body)
        tracker.emit(current=self.result.metadata.path)

    async def _mirror_experiments(self) -> None:
        """The host's experiment ledger (every console's changes) into `experiments/HOST/`:
        each file is written once and holds the same bytes as on the host, so an unchanged
        ledger places nothing."""
        directory = self.job.package / EXPERIMENTS_DIR / self.profile.name
        for path, experiment in await load_from_host(self.session):
            self.tracker.files_total += 1
            name = posixpath.basename(path)
            placement = await self._write(directory, name, text_of(experiment))
            self._add(placement, path, refetch_command(self.profile, remote.read_file(path)))

    async def _mirror_campaigns(self) -> None:
        """The host's tuning campaigns into `campaigns/HOST/` (a record that changed since
        the last snapshot is kept beside the older copy, as every host file is)."""
        directory = self.job.package / CAMPAIGNS_DIR / self.profile.name
        unit = self.profile.service.unit
        for campaign in await load_campaigns(self.session, unit):
            self.tracker.files_total += 1
            path = campaign_path(unit, campaign.id, self.profile.service.state_dir)
            placement = await self._write(directory, f"{campaign.id}.json", campaign_text(campaign))
            self._add(placement, path, refetch_command(self.profile, remote.read_file(path)))

    async def _fetch_campaign_bench(self, sftp: asyncssh.SFTPClient) -> None:
        """Each campaign's `--bench` results (`campaigns/ID-bench/` on the host) into
        `campaigns/HOST/ID-bench/`, beside the record that names them; the same checks as
        any bench file (links out of the directory, the size cap)."""
        service = self.profile.service
        root = campaigns_dir(service.unit, service.state_dir)
        try:
            found = await host_glob(sftp, posixpath.join(root, "*-bench"))
        except asyncssh.SFTPError:
            return  # no campaign ran a benchmark here (or none ran at all)
        for raw in found:
            directory = raw.decode("utf-8", "surrogateescape")
            artifacts = self.profile.artifacts.model_copy(
                update={"bench": (posixpath.join(directory, "*"),)}
            )
            files = await bench_files(self.session, sftp, artifacts, self.result)
            self.tracker.files_total += len(files)
            self.tracker.bytes_total += sum(b.size for b in files)
            place = self.job.package / CAMPAIGNS_DIR / self.profile.name
            await self._fetch_bench(sftp, files, place / posixpath.basename(directory))

    async def _fetch_bench(
        self, sftp: asyncssh.SFTPClient, bench: Sequence[Bench], directory: Path | None = None
    ) -> None:
        """The bench files into `directory` (default `bench/results_HOST/`)."""
        if not bench:
            return
        directory = directory or self.job.package / "bench" / f"results_{self.profile.name}"
        # The host hashes the files (in this order) while several at a time download.
        async with HostDigests(self.session, [(b.source, b.size) for b in bench]) as digests:
            await run_bounded(
                FileJob(
                    item.name,
                    item.size,
                    functools.partial(self._fetch_one, sftp, digests, directory, item),
                )
                for item in bench
            )

    async def _fetch_one(
        self, sftp: asyncssh.SFTPClient, digests: HostDigests, directory: Path, item: Bench
    ) -> None:
        name = item.name
        self.tracker.emit(current=self._rel(directory / name))
        try:
            placement = await fetch(
                self.session,
                sftp,
                item.source,
                directory,
                name,
                digest=digests,
                size=item.size,
                mtime=item.mtime,
                mode=item.mode,
                progress=self.tracker.transferred,
                package=self.job.package,
            )
        except TransferError as exc:
            self.result.errors.append(str(exc).removeprefix(f"{self.profile.name}: "))
            return
        except OSError as exc:  # this file's place in the package: the others go on
            self.result.errors.append(f"{shown(item.source)} → {self._rel(directory)}: {exc}")
            return
        if placement.outcome is Outcome.UNCHANGED:
            self.tracker.bytes_done += item.size
        rel = self._rel(placement.path)
        self._add(placement, item.source, refetch_file(self.profile, item.source, rel))


async def snapshot_host(
    job: Job, session: HostSession, on_progress: OnProgress | None = None
) -> HostSnapshot:
    """One host's snapshot; never raises for anything the host or the disk did."""
    tracker = _Tracker(job.profile.name, on_progress)
    tracker.emit(SnapshotStage.CONNECTING)
    state = await session.wait_settled(job.profile.ssh.connect_timeout_s + 5)
    if state.state is not ConnState.CONNECTED:
        result = HostSnapshot(job.profile.name, job.package, HostOutcome.UNREACHABLE)
        detail = f" ({state.detail})" if state.detail else ""
        result.errors.append(f"{state.state.value}{detail}")
        tracker.emit(SnapshotStage.FAILED, result.errors[0])
        return result
    work = _HostRun(job, session, tracker)
    try:
        await work.run()
    except RemoteError as exc:
        work.result.errors.append(str(exc).removeprefix(f"{job.profile.name}: "))
    except (FlagError, remote.UnsafeArgument) as exc:
        work.result.errors.append(f"{job.profile.service.unit}: {exc}")
    except (OSError, asyncssh.Error) as exc:
        work.result.errors.append(f"{tracker.current or job.package}: {exc}")
    except Exception as exc:  # a bug must not cost the other hosts their snapshot
        log.exception("%s: snapshot failed", job.profile.name)
        work.result.errors.append(f"internal error: {type(exc).__name__}: {exc}")
    if work.result.errors:
        work.result.outcome = HostOutcome.FAILED
        tracker.emit(SnapshotStage.FAILED, work.result.errors[0])
    else:
        tracker.emit(SnapshotStage.DONE, "")
    return work.result


def _finish_package(path: Path) -> PackageResult:
    try:
        updated = write_manifest(path)
        return PackageResult(path, updated, len(package_files(path)))
    except OSError as exc:
        return PackageResult(path, False, 0, f"{path / MANIFEST_NAME}: {exc}")


async def run_snapshot(
    jobs: Sequence[tuple[Job, HostSession]], on_progress: OnProgress | None = None
) -> SnapshotReport:
    """Snapshot every host at once, then regenerate each package's manifest."""
    hosts = list(await asyncio.gather(*(snapshot_host(j, s, on_progress) for j, s in jobs)))
    packages = []
    for path in dict.fromkeys(j.package for j, _ in jobs):
        reached = [
            h for h in hosts if h.package == path and h.outcome is not HostOutcome.UNREACHABLE
        ]
        if not reached:  # nothing was added: no manifest claims an (empty) package
            if any(j.created for j, _ in jobs if j.package == path):
                with contextlib.suppress(OSError):  # made by this run, and still empty
                    path.rmdir()
            packages.append(PackageResult(path, False, 0))
            continue
        packages.append(await asyncio.to_thread(_finish_package, path))
    return SnapshotReport(hosts, packages)
