"""`specops snapshot HOST...`: collect the evidence into a reproduction package.

`snapshot` checks every profile and the package directory before contacting any host (a bad
template or an unwritable package is exit 1 with nothing transferred), snapshots the hosts in
parallel with a live progress display on a terminal, and ends with what each host added:
new, unchanged and kept-both files with their bytes, and anything that failed, by name.
Exit 0 when everything completed, 3 when a host could not be reached, else 1.

"""

from __future__ import annotations

import argparse
import asyncio
import json
from typing import Any

from rich.markup import escape
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TaskID,
    TextColumn,
)

from console.cli.common import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
    err,
    load_profiles,
    new_session,
    out,
)
from console.hosts.events import SnapshotProgress
from console.hosts.profiles import ProfileError, select
from console.package.layout import SnapshotError, plan
from console.package.manifest import MANIFEST_NAME
from console.package.snapshot import HostOutcome, HostSnapshot, SnapshotReport, run_snapshot
from console.package.transfer import Outcome, human_size


def _say(text: str) -> None:
    out.print(text, soft_wrap=True)  # paths are copied from here: never break them


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    snap = sub.add_parser(
        "snapshot", parents=[common], help="collect bench results, journal, unit into a package"
    )
    snap.add_argument("hosts", nargs="+", metavar="HOST")
    snap.add_argument(
        "--package", metavar="DIR", help="package directory (default: each profile's own)"
    )
    snap.add_argument("--json", action="store_true", help="one JSON object per host and package")


# --- snapshot ------------------------------------------------------------------------------


class _Display:
    """One progress bar per host on a terminal; nothing at all otherwise."""

    def __init__(self, hosts: list[str], enabled: bool) -> None:
        self.progress: Progress | None = None
        self.tasks: dict[str, TaskID] = {}
        if enabled:
            self.progress = Progress(
                TextColumn("{task.fields[host]:<10}"),
                TextColumn("{task.fields[stage]:<17}"),
                BarColumn(),
                TextColumn("{task.fields[files]}"),
                DownloadColumn(binary_units=True),
                TextColumn("{task.fields[current]}"),
                console=err,
                transient=True,
            )
            for host in hosts:
                self.tasks[host] = self.progress.add_task(
                    host, total=None, host=host, stage="", files="", current=""
                )

    def __enter__(self) -> _Display:
        if self.progress is not None:
            self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.progress is not None:
            self.progress.stop()

    def update(self, event: SnapshotProgress) -> None:
        if self.progress is None:
            return
        files = f"{event.files_done}/{event.files_total} files" if event.files_total else ""
        self.progress.update(
            self.tasks[event.host],
            total=event.bytes_total or None,
            completed=event.bytes_done,
            stage=event.stage.value,
            files=files,
            current=escape(event.current[-48:]),
        )


def _host_record(result: HostSnapshot) -> dict[str, Any]:
    record: dict[str, Any] = {
        "host": result.host,
        "outcome": result.outcome.value,
        "package": str(result.package),
    }
    for outcome in Outcome:
        files, size = result.count(outcome)
        record[outcome.value.replace(" ", "_")] = {"files": files, "bytes": size}
    record["kept_both_paths"] = [a.path for a in result.artifacts if a.outcome is Outcome.KEPT_BOTH]
    record["metadata"] = result.metadata.path if result.metadata else None
    record["errors"] = result.errors
    record["notes"] = result.notes
    return record


def _print_summary(report: SnapshotReport) -> None:
    width = max((len(h.host) for h in report.hosts), default=4)
    for result in report.hosts:
        name = escape(result.host.ljust(width))
        if result.outcome is HostOutcome.OK:
            parts = []
            for outcome in Outcome:
                files, size = result.count(outcome)
                parts.append(f"{files} {outcome.value} ({human_size(size)})")
            _say(f"{name}  [green]ok[/]      " + " · ".join(parts))
        else:
            label = "UNREACHABLE" if result.outcome is HostOutcome.UNREACHABLE else "FAILED"
            _say(f"{name}  [red]{label}[/]  {escape(result.errors[0])}")
            for error in result.errors[1:]:
                _say(f"{' ' * width}  {' ' * len(label)}  {escape(error)}")
        pad = " " * width
        for artifact in result.artifacts:
            if artifact.outcome is Outcome.KEPT_BOTH:
                _say(f"{pad}  kept both: {escape(artifact.path)} (the older copy stays)")
        for note in result.notes:
            _say(f"{pad}  note: {escape(note)}")
        if result.metadata is not None:
            state = "new" if result.metadata.outcome is not Outcome.UNCHANGED else "unchanged"
            _say(f"{pad}  snapshot: {escape(result.metadata.path)} ({state})")
    for package in report.packages:
        if package.error:
            _say(f"[red]{escape(str(package.path))}: {escape(package.error)}[/]")
        else:
            what = "updated" if package.manifest_updated else "unchanged"
            _say(f"{escape(str(package.path))}: {MANIFEST_NAME} {what}, {package.files} files")


async def cmd_snapshot(args: argparse.Namespace) -> int:
    profiles = select(load_profiles(args), args.hosts)
    try:
        jobs = plan(profiles, args.package)
    except SnapshotError as exc:
        err.print(f"specops: {exc}", markup=False, soft_wrap=True)
        return EXIT_USAGE if isinstance(exc, ProfileError) else EXIT_FAILED
    sessions = [new_session(job.profile) for job in jobs]  # every command is audited
    for session in sessions:
        session.start()
    display = _Display([j.profile.name for j in jobs], err.is_terminal and not args.json)
    try:
        with display:
            report = await run_snapshot(list(zip(jobs, sessions, strict=True)), display.update)
    finally:
        await asyncio.gather(*(s.close() for s in sessions))
    if args.json:
        for result in report.hosts:
            print(json.dumps(_host_record(result)), flush=True)
        for package in report.packages:
            record = {
                "package": str(package.path),
                "manifest_updated": package.manifest_updated,
                "files": package.files,
                "error": package.error,
            }
            print(json.dumps(record), flush=True)
    else:
        _print_summary(report)
    if report.ok:
        return EXIT_OK
    return EXIT_UNREACHABLE if report.unreachable else EXIT_FAILED


def run(args: argparse.Namespace) -> int:
    return asyncio.run(cmd_snapshot(args))
