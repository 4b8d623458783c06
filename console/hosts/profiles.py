"""Host profiles: one TOML file per GPU host, validated into frozen pydantic models.

A directory of profiles is a fleet. Every validation error names the file, the field and the
offending value, so a typo in a profile stops the console before any host is touched.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, TypeAlias

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

UNIT_RE = re.compile(r"^[A-Za-z0-9@._:-]+\.service$")
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")
ENV_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
ARG_RE = re.compile(r"^--?[A-Za-z0-9][A-Za-z0-9_-]*$")

Port = Annotated[int, Field(ge=1, le=65535, strict=True)]
"""Strict: TOML's `true` is not port 1."""

FlagValue: TypeAlias = int | float | str | bool | None
"""A flag's value: int/float/str (choice is a str), bool for switches, None when absent."""

SECRET_MASK = "***"
"""What a secret value is shown and stored as, wherever specops writes or prints it."""


class _Strict(BaseModel):
    # allow_inf_nan: `ready_timeout_s = inf` or `min = nan` (both valid TOML) are refused.
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


_NOT_IN_ADDRESS = frozenset("<>\"'`;|&$(){}\\,")
"""Characters no host name, address, user or `user@host:port` jump holds (IPv6 brackets are
allowed: `[::1]`)."""


class SSHConfig(_Strict):
    """How to reach the host. Anything left unset falls back to ssh_config, then defaults."""

    host: str = Field(min_length=1, max_length=253)
    """Address or an alias resolved through ssh_config (at most 253 characters, as DNS)."""
    port: Port | None = None
    """TCP port; None means ssh_config's Port, else 22."""
    user: str | None = None
    identity_file: Path | None = None
    known_hosts: Path | None = None
    """Pinned host keys; default `~/.ssh/known_hosts`. Non-22 ports need `[host]:port` entries."""
    config_file: Path | None = None
    """An ssh_config file to honour (default: `~/.ssh/config` when it exists)."""
    proxy_jump: str | None = None
    """`[user@]host[:port]` of a jump host, as in ssh -J."""
    sudo: bool = False
    """Run privileged commands (systemctl changes, drop-in writes) as `sudo -n …`."""
    connect_timeout_s: float = Field(default=10.0, gt=0, le=600)
    keepalive_interval_s: float = Field(default=15.0, gt=0, le=3600)
    keepalive_count_max: int = Field(default=3, ge=1, le=100)

    @field_validator("host", "user", "proxy_jump")
    @classmethod
    def _no_whitespace(cls, value: str | None) -> str | None:
        if value is not None and (not value or any(c.isspace() for c in value)):
            raise ValueError("must be non-empty and contain no whitespace")
        if value is not None and (bad := sorted(set(value) & _NOT_IN_ADDRESS)):
            # `<10.1.2.3>` from a template typo was taken for a name to resolve.
            raise ValueError(f"must not contain {' '.join(repr(c) for c in bad)}")
        return value


class SmokeConfig(_Strict):
    """A deterministic completion that must contain `expect` (temperature 0)."""

    prompt: str = "2+2="
    expect: str = "4"
    max_tokens: int = Field(default=8, ge=1, le=4096)


class ServiceConfig(_Strict):
    unit: str
    port: Port = 30000
    """HTTP port of the server on the host, reached through the SSH connection."""
    ready_timeout_s: float = Field(default=900.0, gt=0, le=86400)
    smoke: SmokeConfig = SmokeConfig()
    health_path: str = "/health"
    check_flags: bool = True
    """Check flag names against the installed build's `launch_server --help` before applying."""
    soak_s: float = Field(default=60.0, ge=0, le=86400)
    """After the smoke test, how long the new invocation must stay up (same InvocationID,
    NRestarts unchanged, no crash line, /health 200) before the change counts as good."""
    probation_s: float = Field(default=1800.0, ge=0, le=7 * 86400)
    """After a change is kept, how long a crash or restart of the service still rolls it
    back by itself (console/tuning/probation.py); 0: no probation."""
    auto_rollback: Annotated[bool, Field(strict=True)] = True
    """Roll back a crash during probation by itself (after a countdown the operator can
    cancel); false: the alert says the host is on probation, and nothing is changed."""
    rollback_countdown_s: float = Field(default=10.0, ge=0, le=600)
    """How long a probation rollback is announced before it starts (the time to cancel it)."""
    state_dir: str = "/var/lib/specops"
    """Where specops keeps its records on the host (history, experiments, campaigns, under
    `STATE_DIR/UNIT/`); it must be writable by the SSH user (or through sudo)."""

    @field_validator("state_dir")
    @classmethod
    def _state_dir(cls, value: str) -> str:
        parts = value.split("/")
        if (
            not value.startswith("/")
            or value == "/"
            or ".." in parts
            or not re.fullmatch(r"[A-Za-z0-9._/+-]+", value)
        ):
            raise ValueError(
                "must be an absolute directory of letters, digits and . _ + - (no '..'), "
                "like '/var/lib/specops'"
            )
        return value.rstrip("/")

    @field_validator("unit")
    @classmethod
    def _unit_name(cls, value: str) -> str:
        if not UNIT_RE.match(value):
            raise ValueError("must be a systemd service name like 'sglang-x.service'")
        return value

    @field_validator("health_path")
    @classmethod
    def _path(cls, value: str) -> str:
        if not re.fullmatch(r"/[!-~]*", value):  # it goes into an HTTP request line
            raise ValueError("must start with '/' and be printable ASCII without whitespace")
        return value


def _check_regex(value: str) -> str:
    try:
        re.compile(value)
    except re.error as exc:
        raise ValueError(f"not a valid regular expression: {exc}") from exc
    return value


class JournalConfig(_Strict):
    patterns: tuple[str, ...] = ()
    """Regexes (Python syntax, searched anywhere in MESSAGE) that the default view shows."""

    @field_validator("patterns")
    @classmethod
    def _regexes(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for pattern in value:
            _check_regex(pattern)
        return value


class MetricPattern(_Strict):
    """A private log line to chart, e.g. `DDTREE metrics … recent_al=4.1`."""

    name: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    regex: str

    @field_validator("regex")
    @classmethod
    def _value_group(cls, value: str) -> str:
        _check_regex(value)
        if "value" not in re.compile(value).groupindex:
            raise ValueError("must have a named group (?P<value>…)")
        return value


FlagType = Literal["int", "float", "str", "choice", "switch"]


class FlagSpec(_Strict):
    """A friendly flag name mapped to an ExecStart argument or an Environment= variable."""

    arg: str | None = None
    env: str | None = None
    type: FlagType
    inverted: bool = False
    """For switches named `--disable-*`: the flag is *on* when the argument is absent."""
    value: str | None = None
    """For a switch written `ARG VALUE` (`--cuda-graph-backend-decode disabled`): the value
    that means the argument is present; other values of ARG are left alone."""
    min: float | None = None
    max: float | None = None
    choices: tuple[str, ...] | None = None
    help: str = ""
    secret: bool = False
    """Its value is a secret: shown as `***` in the package and the audit log."""

    @model_validator(mode="before")
    @classmethod
    def _counts_start_at_one(cls, data: Any) -> Any:
        """An int flag without a `min` is a count (budget, top-k, max running, window):
        `budget=-1` must be refused before it reaches a host. `min = 0` (or lower) says
        otherwise."""
        if isinstance(data, dict) and data.get("type") == "int" and data.get("min") is None:
            return {**data, "min": 1}
        return data

    @field_validator("arg")
    @classmethod
    def _arg(cls, value: str | None) -> str | None:
        if value is not None and not ARG_RE.match(value):
            raise ValueError("must look like --some-argument")
        return value

    @field_validator("env")
    @classmethod
    def _env(cls, value: str | None) -> str | None:
        if value is not None and not ENV_RE.match(value):
            raise ValueError("must be an environment variable name")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> FlagSpec:
        if (self.arg is None) == (self.env is None):
            raise ValueError("set exactly one of 'arg' or 'env'")
        if self.type == "choice" and not self.choices:
            raise ValueError("type 'choice' needs 'choices'")
        if self.type != "choice" and self.choices:
            raise ValueError("'choices' only applies to type 'choice'")
        if self.inverted and self.type != "switch":
            raise ValueError("'inverted' only applies to type 'switch'")
        if self.type == "switch" and self.env is not None:
            raise ValueError("a switch maps to an argument, not an environment variable")
        if (self.min is not None or self.max is not None) and self.type not in ("int", "float"):
            raise ValueError("'min'/'max' only apply to int and float flags")
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError(f"'min' ({self.min:g}) is greater than 'max' ({self.max:g})")
        if self.value is not None and self.type != "switch":
            raise ValueError("'value' only applies to type 'switch'")
        return self


SYSTEM_DIRS = frozenset(("etc", "proc", "sys", "dev", "boot", "run", "usr", "bin", "sbin", "lib"))
"""Top-level directories a bench glob may not reach into."""


class ArtifactsConfig(_Strict):
    package: str = "~/specops-repro"
    """Local directory of the reproduction package (`~` expanded)."""
    bench: tuple[str, ...] = ()
    """Remote globs of benchmark result files to collect."""
    bench_symlinks_anywhere: bool = False
    """Follow a matched symlink wherever it points; by default only to a file inside the
    directory its glob names (a link in the bench dir to /etc/shadow is skipped, noted)."""
    max_file_bytes: int = Field(default=4 << 30, ge=1, le=1 << 50)
    """The largest bench file collected (default 4 GiB); a larger one is skipped, noted."""
    variant: str = "{budget}"
    """How a configuration names itself in artifact names, from the flag values."""
    journal_since: str = "4 hours ago"
    journal_lines: int = Field(default=200, ge=1, le=100_000)
    crash_context_lines: int = Field(default=5, ge=0, le=1000)

    @field_validator("bench")
    @classmethod
    def _bench(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        """A glob names bench results: `bench = ["/etc/shadow", "/root/../../etc/*"]` put 69
        files of /etc into a package made to be shared."""
        for glob in value:
            parts = glob.split("/")
            if not glob or "\0" in glob or ".." in parts:
                raise ValueError(f"{glob!r}: a bench glob is a path without '..'")
            top = parts[1] if glob.startswith("/") and len(parts) > 1 else ""
            if top in SYSTEM_DIRS:
                raise ValueError(
                    f"{glob!r}: /{top} holds the system's files, not benchmark results"
                )
        return value


_PROGRAM = re.compile(r"[A-Za-z0-9_./+:=@-]+")


class GpuConfig(_Strict):
    """How the host's GPUs are read (`nvidia-smi --query-gpu`), and how often."""

    command: tuple[str, ...] = ("nvidia-smi",)
    """The program that answers nvidia-smi's query, as its argv; the query's arguments follow
    it. Inside a container: `["docker", "exec", "sglang", "nvidia-smi"]`."""
    interval_s: float = Field(default=10.0, ge=1, le=3600)
    """Seconds between two reads, for the hosts on screen (the TUI and `watch`)."""
    enabled: Annotated[bool, Field(strict=True)] = True
    """false: specops never runs the command (a host without NVIDIA GPUs)."""
    timeout_s: float = Field(default=20.0, gt=0, le=300)
    """How long one read may take: a GPU off the bus can hang nvidia-smi, never the poll."""

    @field_validator("command")
    @classmethod
    def _command(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if not value:
            raise ValueError('must name a program, like ["nvidia-smi"]')
        for word in value:
            if not _PROGRAM.fullmatch(word):
                raise ValueError(
                    f"{word!r}: each word is letters, digits and _ . / + : = @ - (no spaces, "
                    "quotes or shell characters: the words are sent as one argv)"
                )
        if value[0].startswith("-"):
            raise ValueError(f"{value[0]!r}: the first word is the program, not an option")
        return value


class Profile(_Strict):
    name: str
    ssh: SSHConfig
    service: ServiceConfig
    journal: JournalConfig = JournalConfig()
    flags: dict[str, FlagSpec] = {}
    artifacts: ArtifactsConfig = ArtifactsConfig()
    metrics: tuple[MetricPattern, ...] = ()
    gpu: GpuConfig = GpuConfig()
    groups: tuple[str, ...] = ()
    """Fleet groups the host is in (from an Ansible inventory: its groups, shallowest first)."""

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not NAME_RE.match(value):
            raise ValueError("must be letters, digits, '.', '_' or '-' (up to 63)")
        return value

    @field_validator("flags")
    @classmethod
    def _flag_names(cls, value: dict[str, FlagSpec]) -> dict[str, FlagSpec]:
        for name in value:
            if not re.match(r"^[a-z][a-z0-9_]*$", name):
                raise ValueError(f"flag name {name!r} must be lower_snake_case")
        return value

    @property
    def ssh_port(self) -> int:
        return self.ssh.port or 22

    def masked(self, values: Mapping[str, FlagValue]) -> dict[str, FlagValue]:
        """`values` with each `secret = true` flag's value shown as SECRET_MASK."""
        secret = self.secret_names
        return {k: SECRET_MASK if k in secret and v is not None else v for k, v in values.items()}

    @property
    def secret_names(self) -> frozenset[str]:
        """Flag names, arguments and variables whose values are secrets (`secret = true`)."""
        return frozenset(
            name
            for key, spec in self.flags.items()
            if spec.secret
            for name in (key, spec.arg, spec.env)
            if name is not None
        )


class ProfileError(Exception):
    """A profile could not be loaded. The message names the file, field and value."""


@dataclass(frozen=True)
class Unusable:
    """An inventory host specops cannot reach as its variables stand (a key file that is not
    there, a ProxyCommand it cannot follow, a bad address): that host's error, not the
    fleet's; the others load."""

    name: str
    reason: str
    """The inventory, host, variable and value, and what is wrong with them."""
    groups: tuple[str, ...] = ()


def _shown_value(value: object, limit: int = 80) -> str:
    """A value for an error message: its repr, cut short (a 100k-character host, 5000 digits)."""
    try:
        text = repr(value)
    except ValueError:  # an int too long for str() (Python's 4300-digit limit)
        text = f"<{type(value).__name__} too long to show>"
    return text if len(text) <= limit else f"{text[: limit - 1]}… ({len(text)} characters)"


def format_validation(path: Path, exc: ValidationError) -> str:
    lines = []
    for err in exc.errors():
        field = ".".join(str(p) for p in err["loc"]) or "(top level)"
        value = _shown_value(err.get("input"))
        if err["type"] == "extra_forbidden":
            lines.append(f"{path}: unknown key '{field}' (value {value})")
        elif err["type"] == "missing":
            lines.append(f"{path}: field '{field}' is required")
        else:
            msg = err["msg"].removeprefix("Value error, ")
            lines.append(f"{path}: field '{field}' = {value}: {msg}")
    return "\n".join(lines)


def parse_profile(data: dict[str, Any], source: Path) -> Profile:
    try:
        return Profile.model_validate(data)
    except ValidationError as exc:
        raise ProfileError(format_validation(source, exc)) from None


def load_profile(path: Path) -> Profile:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ProfileError(f"{path}: cannot read: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise ProfileError(
            f"{path}: not UTF-8: byte 0x{exc.object[exc.start]:02x} at offset {exc.start}"
        ) from None
    except (tomllib.TOMLDecodeError, ValueError) as exc:  # ValueError: a 5000-digit number
        raise ProfileError(f"{path}: not valid TOML: {exc}") from None
    return parse_profile(data, path)


def load_fleet(directory: Path) -> list[Profile]:
    """Load every `*.toml` in `directory`, sorted by file name. Names must be unique."""
    if not directory.is_dir():
        raise ProfileError(f"{directory}: not a directory of profiles")
    files = sorted(directory.glob("*.toml"))
    if not files:
        raise ProfileError(f"{directory}: no *.toml profiles found")
    return _unique(directory, ((f, load_profile(f)) for f in files))


def _unique(directory: Path, loaded: Iterable[tuple[Path, Profile]]) -> list[Profile]:
    seen: dict[str, Path] = {}
    profiles: list[Profile] = []
    errors: list[str] = []
    for path, profile in loaded:
        if profile.name in seen:
            errors.append(
                f"{path}: field 'name' = {profile.name!r}: already used by {seen[profile.name]}"
            )
        seen[profile.name] = path
        profiles.append(profile)
    if errors:
        raise ProfileError("\n".join(errors))
    return profiles


def select(profiles: list[Profile], names: Iterable[str]) -> list[Profile]:
    """The profiles named, in the order asked; all of them when no name is given."""
    wanted = list(names)
    if not wanted:
        return profiles
    by_name = {p.name: p for p in profiles}
    unknown = [n for n in wanted if n not in by_name]
    if unknown:
        raise ProfileError(
            f"unknown host {', '.join(map(repr, unknown))}; known: {', '.join(sorted(by_name))}"
        )
    return [by_name[n] for n in wanted]
