"""The reproduction package: its layout and names, the checks made before anything is
transferred, how each artifact can be fetched again, and the per-snapshot metadata file.

    bench/results_<host>/NAME                     every remote file the bench globs match
    <host>_logs/journal_excerpt.txt               the filtered journal (console/package/excerpt.py)
    <host>_logs/current_execstart.txt             the effective ExecStart= and Environment=
    services/<unit stem>-<HOST>-<variant>.service the effective unit (`systemctl cat`)
    snapshots/<host>-<UTC time>-<id>.json         what a snapshot saw, and how to re-fetch it
    MANIFEST.sha256                               over the whole package (evidence/manifest.py)

HOST in the unit's file name is the profile name upper-cased (`sglang-k26-ddtree-B300-…`, as
the seeds named them); everywhere else the profile name is used as written. Files get in only
through console/package/transfer.py: never half-written, never replaced (changed content is kept
beside the old as `NAME.<sha256 prefix>.EXT`), not rewritten when unchanged.

The metadata JSON holds the one thing that differs on every run, the time. So that an
unchanged host still gives a byte-identical package and manifest, its name carries `<id>`,
the start of a sha256 over everything in it except the time: a snapshot that saw exactly what
an earlier one saw finds that file and writes nothing, and the file's `time` says when that
state was first recorded. Anything that changed (a bench file, the journal, the invocation,
the flags) makes a new id and a new metadata file; older ones are kept.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from console.hosts.profiles import FlagSpec, FlagValue, Profile, ProfileError
from console.package.manifest import PART_SUFFIX
from console.package.transfer import Outcome, write_bytes
from console.service.execline import FlagError, render_execstart
from console.service.flags import format_variant
from console.service.unit import ServiceExec
from console.transport import remote

FORMAT = "specops-snapshot/1"
SNAPSHOTS_DIR = "snapshots"
SERVICES_DIR = "services"
EXCERPT_NAME = "journal_excerpt.txt"
EXECSTART_NAME = "current_execstart.txt"
GPUS_NAME = "gpus.json"
"""The GPUs at the snapshot and the driver's Xid errors of the last ten minutes (hosts with
nvidia-smi only)."""


class SnapshotError(Exception):
    """The snapshot was refused before any host was contacted; the message says why."""


class ProfileProblem(SnapshotError, ProfileError):
    """A profile a snapshot cannot use (a bad variant template or bench glob): exit 2."""


@dataclass(frozen=True)
class Artifact:
    """One file of a snapshot, where it is in the package and how to get it again."""

    path: str
    """Relative POSIX path in the package."""
    sha256: str
    size: int
    outcome: Outcome
    source: str
    """The remote path, or the remote command the content was derived from."""
    refetch: str
    """A local shell command that fetches the same content again."""


@dataclass(frozen=True)
class Job:
    profile: Profile
    package: Path
    created: bool = False
    """This snapshot made the package directory: if no host is reached it is removed again
    (while still empty), so an unreachable run leaves nothing behind."""


# --- before anything is transferred ------------------------------------------------------


def package_dir(value: str | os.PathLike[str]) -> Path:
    return Path(value).expanduser().absolute()


def host_dirs(package: Path, host: str) -> list[Path]:
    return [
        package / "bench" / f"results_{host}",
        package / f"{host}_logs",
        package / SERVICES_DIR,
        package / SNAPSHOTS_DIR,
    ]


def _check_writable(package: Path, hosts: Sequence[str]) -> bool:
    """Whether the package directory can take the hosts' files; True when it was made here."""
    if package.exists() and not package.is_dir():
        raise SnapshotError(f"package {package}: exists and is not a directory")
    created = not package.exists()
    try:
        package.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise SnapshotError(f"package {package}: cannot create it: {exc.strerror}") from None
    dirs = [package, *(d for h in hosts for d in host_dirs(package, h) if d.exists())]
    for directory in dict.fromkeys(dirs):
        try:
            fd, probe = tempfile.mkstemp(dir=directory, prefix=".probe.", suffix=PART_SUFFIX)
            os.close(fd)
            os.unlink(probe)
        except OSError as exc:
            raise SnapshotError(
                f"package {package}: cannot write in {directory}: {exc.strerror}"
            ) from None
    return created


def _sample(spec: FlagSpec) -> FlagValue:
    """A value a flag of this type could have, to try a variant's format specs on."""
    if spec.type == "switch":
        return True
    if spec.type == "choice":
        return spec.choices[0] if spec.choices else ""
    if spec.type == "str":
        return "x"
    bound = spec.min if spec.min is not None else 1
    return int(bound) if spec.type == "int" else float(bound)


def _check_profile(profile: Profile) -> list[str]:
    problems: list[str] = []
    template = profile.artifacts.variant
    try:
        format_variant(template, dict.fromkeys(profile.flags))
        # a format spec is only applied to a value: try one of each flag's type too
        format_variant(template, {name: _sample(spec) for name, spec in profile.flags.items()})
    except FlagError as exc:
        problems.append(f"profile {profile.name}: field 'artifacts.variant' = {template!r}: {exc}")
    for pattern in profile.artifacts.bench:
        if not pattern.startswith("/") or any(c in pattern for c in "\0\n\r"):
            problems.append(
                f"profile {profile.name}: field 'artifacts.bench' = {pattern!r}: "
                "must be an absolute path or glob on the host"
            )
    return problems


def plan(profiles: Sequence[Profile], package: str | os.PathLike[str] | None = None) -> list[Job]:
    """The jobs of a snapshot, after checking every profile and package directory locally."""
    problems = [p for profile in profiles for p in _check_profile(profile)]
    if problems:
        raise ProfileProblem("\n".join(problems))
    jobs = [Job(p, package_dir(package or p.artifacts.package)) for p in profiles]
    made: set[Path] = set()
    for directory in dict.fromkeys(j.package for j in jobs):
        if _check_writable(directory, [j.profile.name for j in jobs if j.package == directory]):
            made.add(directory)
    return [replace(j, created=j.package in made) for j in jobs]


# --- naming and re-fetching ----------------------------------------------------------------


def ssh_argv(profile: Profile, scp: bool = False) -> list[str]:
    """OpenSSH options that reach the host the way the profile does (for re-fetch commands)."""
    ssh = profile.ssh
    argv = ["scp" if scp else "ssh"]
    if ssh.port is not None:
        argv += ["-P" if scp else "-p", str(ssh.port)]
    if ssh.identity_file is not None:
        argv += ["-i", str(ssh.identity_file)]
    if ssh.known_hosts is not None:
        argv += ["-o", f"UserKnownHostsFile={ssh.known_hosts}"]
    if ssh.config_file is not None:
        argv += ["-F", str(ssh.config_file)]
    if ssh.proxy_jump is not None:
        argv += ["-J", ssh.proxy_jump]
    return argv


def ssh_target(profile: Profile) -> str:
    return f"{profile.ssh.user}@{profile.ssh.host}" if profile.ssh.user else profile.ssh.host


def refetch_command(profile: Profile, command: remote.Command) -> str:
    return shlex.join([*ssh_argv(profile), ssh_target(profile), command.shell(profile.ssh.sudo)])


def refetch_file(profile: Profile, source: str, dest: str) -> str:
    return shlex.join([*ssh_argv(profile, scp=True), f"{ssh_target(profile)}:{source}", dest])


def service_file_name(profile: Profile, variant: str) -> str:
    stem = profile.service.unit.removesuffix(".service")
    return "-".join(p for p in (stem, profile.name.upper(), variant) if p) + ".service"


def execstart_text(host: str, unit: str, service: ServiceExec) -> str:
    command = service.command
    words = [f"{k}={v}" for k, v in service.environment.items()]
    lines = [
        f"# {unit} on {host}: the effective ExecStart= (from {service.execstart_source})",
        f"ExecStart={render_execstart(command.argv, command.prefix)}",
        "# the same command with its Environment=, as a shell command line:",
        shlex.join(["env", *words, *command.argv]) if words else shlex.join(command.argv),
    ]
    if service.environment_files:
        lines.append(f"# plus EnvironmentFile= {' '.join(service.environment_files)}")
    return "\n".join(lines) + "\n"


# --- metadata ------------------------------------------------------------------------------


def write_metadata(package: Path, host: str, body: dict[str, Any]) -> Artifact:
    canonical = json.dumps(body, sort_keys=True, ensure_ascii=False)
    snapshot_id = hashlib.sha256(canonical.encode()).hexdigest()
    directory = package / SNAPSHOTS_DIR
    for existing in sorted(directory.glob(f"{host}-*-{snapshot_id[:8]}.json")):
        try:
            seen = json.loads(existing.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(seen, dict) and seen.get("snapshot_id") == snapshot_id:
            data = existing.read_bytes()
            digest = hashlib.sha256(data).hexdigest()
            rel = existing.relative_to(package).as_posix()
            return Artifact(rel, digest, len(data), Outcome.UNCHANGED, "", "")
    now = datetime.now(UTC)
    record = {**body, "snapshot_id": snapshot_id, "time": now.isoformat(timespec="seconds")}
    text = json.dumps(record, sort_keys=True, indent=2, ensure_ascii=False) + "\n"
    name = f"{host}-{now.strftime('%Y%m%dT%H%M%SZ')}-{snapshot_id[:8]}.json"
    placement = write_bytes(directory, name, text.encode())
    rel = placement.path.relative_to(package).as_posix()
    return Artifact(rel, placement.sha256, placement.size, placement.outcome, "", "")
