"""What a flag change would do, worked out before anything on the host changes.

Three gates stand between `budget=16` typed by a person and a restarted server:

1. `parse_assignments`: every NAME=VALUE is checked against the profile's flag specs with
   no I/O at all, so `budget=-1` or `budget=8; rm -rf /` is refused before a connection
   is even opened.
2. `make_plan`: the effective unit (`systemctl cat`) is parsed as systemd reads it and the
   new argv, environment, drop-in and a readable diff are computed (console/service/flags.py).
3. `check_arguments`: the unit's own interpreter is asked for `-m sglang.launch_server
   --help`, and an argument that build does not know is refused (flags get renamed between
   SGLang versions; an unknown one would crash the server at start-up).

Between 1 and 2, `read_plan` asks the same interpreter for `sglang.__version__` and maps each
changed flag to the argument that release takes (`console.service.catalogue`): on 0.5.23
`cuda_graph=off` writes `--cuda-graph-backend-decode disabled`, and a profile argument the
release removed is refused naming its replacement.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from console.hosts.profiles import SECRET_MASK, FlagSpec, FlagValue, Profile
from console.local.redaction import redact_dropin, redact_text
from console.service.catalogue import Release, catalogue
from console.service.execline import FlagError
from console.service.flags import (
    apply_flags,
    diff_argv,
    format_value,
    read_flags,
    remove_argument,
    validate_value,
)
from console.service.release_flags import release_specs
from console.service.unit import (
    ServiceExec,
    dropin_for,
    dropin_path,
    effective_service,
    without_file,
)
from console.service.version import read_version
from console.transport import remote
from console.transport.host_files import check_state_dir
from console.transport.ssh import HostSession

_OPTION_RE = re.compile(r"(?<![\w-])(--?[A-Za-z0-9][A-Za-z0-9_-]*)")


def parse_assignments(profile: Profile, assignments: Sequence[str]) -> dict[str, FlagValue]:
    """`["budget=16", "cuda_graph=off"]` → typed values; FlagError names the bad one."""
    if not assignments:
        raise FlagError("nothing to set: give at least one NAME=VALUE")
    changes: dict[str, FlagValue] = {}
    for text in assignments:
        name, sep, value = text.partition("=")
        name = name.strip()
        if not sep or not name:
            raise FlagError("expected NAME=VALUE", value=text)
        spec = profile.flags.get(name)
        if spec is None:
            known = ", ".join(sorted(profile.flags)) or "none"
            raise FlagError(
                f"no such flag in profile {profile.name!r} (known: {known})", flag=name, value=value
            )
        if name in changes:
            raise FlagError("given more than once", flag=name, value=value)
        changes[name] = validate_value(name, spec, value)
    return changes


@dataclass(frozen=True)
class Plan:
    """One host's change, fully computed: what runs now, what will run, and the drop-in."""

    host: str
    unit: str
    changes: Mapping[str, FlagValue]
    service: ServiceExec
    """The effective unit as read (the record step checks it is still the same)."""
    old_values: Mapping[str, FlagValue]
    new_values: Mapping[str, FlagValue]
    new_argv: tuple[str, ...]
    new_environment: Mapping[str, str]
    diff: str
    """A unified diff of the command line and flag variables; "" when nothing changes."""
    dropin: str | None
    """specops' new drop-in; None removes it (`specops rollback --original`)."""
    dropin_path: str
    release: str | None = None
    """`sglang.__version__` of the unit's interpreter, when it answered."""
    specs: Mapping[str, FlagSpec] | None = None
    """The profile's flags as this release takes them (None: as the profile writes them)."""
    notes: tuple[str, ...] = ()
    """Deprecated arguments met on the way, one sentence each."""
    secrets: frozenset[str] = frozenset()
    """The profile's `secret = true` flags, arguments and variables: their values are shown
    and recorded as SECRET_MASK (the diff already is)."""

    @property
    def changed(self) -> bool:
        return bool(self.diff)

    def masked(self, values: Mapping[str, FlagValue]) -> dict[str, FlagValue]:
        """`values` as they may be shown or recorded: secret flags' values masked."""
        return {
            k: SECRET_MASK if k in self.secrets and v is not None else v for k, v in values.items()
        }

    def summary(self) -> str:
        """`budget 8 → 16, cuda_graph on → off` (only the flags that change; secrets masked)."""
        old, new = self.masked(self.old_values), self.masked(self.new_values)
        parts = [
            f"{name} {format_value(old.get(name))} → {format_value(new[name])}"
            for name, value in self.new_values.items()
            if value != self.old_values.get(name)
        ]
        return ", ".join(parts) or "no change"

    @property
    def shown_dropin(self) -> str | None:
        """The drop-in as it may be shown or recorded (secret values masked)."""
        return None if self.dropin is None else redact_dropin(self.dropin, self.secrets)


def make_plan(
    profile: Profile,
    cat_text: str,
    changes: Mapping[str, FlagValue],
    *,
    version: str | None = None,
    release: Release | None = None,
) -> Plan:
    """Pure: the plan for `changes` on the unit whose `systemctl cat` output is `cat_text`.

    With a `release`, changed flags are written as that release takes them, a deprecated
    argument already on the command line is replaced, and a removed one refused (FlagError).
    """
    unit = profile.service.unit
    service = effective_service(cat_text)
    command = service.require_rewritable()
    old_env = dict(service.environment)
    old_values = read_flags(profile.flags, command.argv, old_env)
    mapped = release_specs(profile.flags, changes, release)
    argv = list(command.argv)
    for name, old_arg in mapped.moved.items():
        argv = remove_argument(argv, old_arg, profile.flags[name].type == "switch")
    new_argv, new_env = apply_flags(mapped.specs, argv, old_env, changes)
    new_values = read_flags(mapped.specs, new_argv, new_env)
    managed = {s.env for s in profile.flags.values() if s.env is not None}
    diff = diff_argv(
        command.argv,
        new_argv,
        old_env={k: v for k, v in old_env.items() if k in managed},
        new_env={k: v for k, v in new_env.items() if k in managed},
        prefix=command.prefix,
    )
    return Plan(
        host=profile.name,
        unit=unit,
        changes=dict(changes),
        service=service,
        old_values=old_values,
        new_values=new_values,
        new_argv=tuple(new_argv),
        new_environment=new_env,
        diff=redact_text(diff, profile.secret_names),
        dropin=dropin_for(profile.flags, service, new_argv, new_env),
        dropin_path=dropin_path(unit),
        release=version,
        specs=mapped.specs,
        notes=mapped.notes,
        secrets=profile.secret_names,
    )


def original_plan(profile: Profile, cat_text: str) -> Plan:
    """Pure: the plan that removes specops' drop-in, back to the unit's own configuration."""
    unit = profile.service.unit
    path = dropin_path(unit)
    service = effective_service(cat_text)
    command = service.require_rewritable()
    original = effective_service(without_file(cat_text, path))
    target = original.require_rewritable()
    old_env, new_env = dict(service.environment), dict(original.environment)
    old_values = read_flags(profile.flags, command.argv, old_env)
    new_values = read_flags(profile.flags, target.argv, new_env)
    managed = {s.env for s in profile.flags.values() if s.env is not None}
    diff = diff_argv(
        command.argv,
        target.argv,
        old_env={k: v for k, v in old_env.items() if k in managed},
        new_env={k: v for k, v in new_env.items() if k in managed},
        prefix=command.prefix,
    )
    if not diff and path in service.files:
        diff = f"--- {path}\n+++ (removed)\n"  # same command, but our drop-in goes
    return Plan(
        host=profile.name,
        unit=unit,
        changes={},
        service=service,
        old_values=old_values,
        new_values=new_values,
        new_argv=tuple(target.argv),
        new_environment=new_env,
        diff=redact_text(diff, profile.secret_names),
        dropin=None,
        dropin_path=path,
        secrets=profile.secret_names,
    )


async def read_plan(session: HostSession, changes: Mapping[str, FlagValue]) -> Plan:
    """Read the effective unit over SSH (read-only) and plan `changes` on it."""
    cat = await session.run(remote.systemctl_cat(session.profile.service.unit), timeout=30)
    service = effective_service(cat.stdout)
    version = await read_version(session, service.argv[0]) if service.argv else None
    release = catalogue().release_for(version)
    return make_plan(session.profile, cat.stdout, changes, version=version, release=release)


def known_arguments(help_text: str) -> frozenset[str]:
    """Every `--option` (and alias) an argparse `--help` lists."""
    return frozenset(_OPTION_RE.findall(help_text))


def arguments_to_check(profile: Profile, plan: Plan) -> list[str]:
    """The changed flags' arguments that will be on the new command line."""
    wanted: list[str] = []
    specs = plan.specs if plan.specs is not None else profile.flags
    for name in plan.changes:
        spec = specs[name]
        if spec.arg is not None and _present(plan.new_argv, spec.arg) and spec.arg not in wanted:
            wanted.append(spec.arg)
    return wanted


def _present(argv: Sequence[str], arg: str) -> bool:
    return any(w == arg or w.startswith(arg + "=") for w in argv[1:])


async def check_arguments(session: HostSession, plan: Plan) -> list[str]:
    """Refuse (FlagError) arguments the unit's SGLang build does not list in `--help`.

    Returns the arguments checked. The interpreter is the ExecStart's own argv[0], so the
    answer comes from exactly the build the unit runs.
    """
    wanted = arguments_to_check(session.profile, plan)
    if not wanted:
        return []
    interpreter = plan.service.argv[0]
    try:
        command = remote.launch_server_help(interpreter)
    except remote.UnsafeArgument as exc:
        raise FlagError(f"cannot ask the build for its flags: {exc}") from None
    result = await session.run(command, timeout=120, check=False)
    if result.returncode != 0:
        tail = (result.stderr.strip().splitlines() or ["no output"])[-1]
        raise FlagError(
            f"`{interpreter} -m sglang.launch_server --help` exited {result.returncode} "
            f"({tail}); set service.check_flags = false in the profile to skip this check"
        )
    known = known_arguments(result.stdout)
    unknown = [arg for arg in wanted if arg not in known]
    if unknown:
        specs = plan.specs if plan.specs is not None else session.profile.flags
        names = [n for n, s in specs.items() if s.arg in unknown]
        raise FlagError(
            f"the SGLang build of {plan.unit} ({interpreter}) does not know "
            f"{', '.join(unknown)}: fix 'arg' of flags.{', flags.'.join(names)} in the "
            "profile (flags are renamed between SGLang versions)",
            flag=names[0] if names else None,
        )
    return wanted


async def prepare(session: HostSession, changes: Mapping[str, FlagValue]) -> Plan:
    """The plan for `changes`, checked against the build when the profile asks for it, on a
    host whose state directory can be written (StateDirRefused)."""
    plan = await read_plan(session, changes)
    if plan.changed and session.profile.service.check_flags:
        await check_arguments(session, plan)
    if plan.changed:
        await check_state_dir(session)  # the change is recorded there before any restart
    return plan
