"""The unit as systemd sees it (`systemctl cat`: the file and its drop-ins) and specops' drop-in.

`effective_service` reads the files in systemd's order (systemd.syntax(7) for continuations and
comments, systemd.unit(5) for drop-in order, systemd.exec(5) for Environment=: "The "$"
character has no special meaning"); `dropin_for` writes the drop-in that turns that effective
command into the one we mean, refusing rewrites it cannot make exactly. Pure functions, no I/O.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from console.hosts.profiles import ENV_RE, UNIT_RE, FlagSpec
from console.service.execline import (
    WHITESPACE,
    ExecCommand,
    FlagError,
    SyntaxProblem,
    escape,
    expand_specifiers,
    extract_word,
    parse_command_line,
    render_words,
)

_ANSI_RE = re.compile(r"\x1b\[[0-9;]*m")
_EOL_RE = re.compile(r"\r\n|\r|\n|\x00")  # systemd's read_line(); not str.splitlines()

DROPIN_NAME = "zz-specops.conf"
"""Sorts after every usual drop-in name, so our ExecStart= is the one that counts."""


# --- unit files: `systemctl cat` output -------------------------------------------------------


@dataclass(frozen=True)
class ServiceExec:
    """The effective [Service] command and environment of a unit, from `systemctl cat UNIT`."""

    files: tuple[str, ...]
    """Every file systemd merged, in order: the unit file first, then its drop-ins."""
    commands: tuple[ExecCommand, ...]
    """The effective ExecStart= list (one command unless Type=oneshot)."""
    execstart_source: str | None
    """The file whose ExecStart= line is in effect."""
    environment: Mapping[str, str] = field(default_factory=dict)
    """Environment= after resets, overrides and UnsetEnvironment=; not EnvironmentFile=."""
    environment_sources: Mapping[str, str] = field(default_factory=dict)
    """For each variable, the file that set it last."""
    unset_environment: tuple[str, ...] = ()
    environment_files: tuple[str, ...] = ()
    """EnvironmentFile= entries: their variables are invisible to us (and may shadow flags)."""
    literal_environment: frozenset[str] = frozenset()
    """Variables whose value holds a specifier we kept literally (not safe to rewrite)."""
    problems: tuple[str, ...] = ()
    """Lines systemd would ignore or warn about, and anything we could not model."""

    @property
    def command(self) -> ExecCommand:
        if len(self.commands) != 1:
            found = len(self.commands)
            raise FlagError(f"the unit must have exactly one ExecStart= command, found {found}")
        return self.commands[0]

    @property
    def argv(self) -> list[str]:
        return list(self.command.argv)

    def require_rewritable(self) -> ExecCommand:
        """The command, or FlagError when rewriting it could change what systemd runs."""
        command = self.command
        if not command.rewritable:
            reasons = "; ".join(command.unsupported) or "it is empty"
            where = self.execstart_source
            raise FlagError(f"refusing to rewrite ExecStart= from {where}: {reasons}")
        return command


def _split_files(text: str) -> tuple[list[tuple[str, list[str]]], list[str]]:
    """Split `systemctl cat` output at its `# /path` headers into (path, lines) per file.

    The first header names the unit file; later ones must look like drop-ins (`*.d/*.conf`),
    so a comment such as `# /opt/venv/bin/python3` inside a unit is not taken for a header.
    """
    files: list[tuple[str, list[str]]] = []
    problems: list[str] = []
    for line in _EOL_RE.split(text):
        clean = _ANSI_RE.sub("", line)
        path = clean[2:].strip() if clean.startswith("# /") else ""
        dropin = re.search(r"\.d/[^/]+\.conf$", path) is not None
        if path and (not files or dropin):
            files.append((path, []))
        elif files:
            files[-1][1].append(line)
        elif line.strip():
            problems.append(f"ignored text before the first file header: {line!r}")
    return files, problems


def without_file(text: str, path: str) -> str:
    """`systemctl cat` output as it would read without the file `path` (e.g. our drop-in)."""
    files, _ = _split_files(text)
    return "".join(
        f"# {name}\n" + "".join(f"{line}\n" for line in lines)
        for name, lines in files
        if name != path
    )


def _logical_lines(lines: list[str]) -> Iterator[str]:
    """Join `\\` continuations and drop comments, as systemd's config_parse() does.

    The continuation backslash becomes a space; comment lines inside a continuation are
    skipped; `\\\\` at the end is an escaped backslash, not a continuation.
    """
    pending: str | None = None
    for index, raw in enumerate(lines):
        line = raw.removeprefix("\ufeff") if index == 0 else raw
        lead = line.lstrip(WHITESPACE)
        if lead and lead[0] in "#;":
            continue
        joined = line if pending is None else pending + line
        escaped = False
        for c in joined:
            escaped = not escaped if c == "\\" else False
        if escaped:
            pending = joined[:-1] + " "
            continue
        pending = None
        yield joined
    if pending is not None:
        yield pending


def _env_words(value: str, problems: list[str], where: str) -> list[str]:
    """Environment=/UnsetEnvironment= words with specifiers applied; stops at a syntax error."""
    words: list[str] = []
    p = 0
    while True:
        try:
            word, p = extract_word(value, p)
        except SyntaxProblem as exc:
            problems.append(f"{where}: {exc}; systemd ignores the rest of {value!r}")
            return words
        if word is None:
            return words
        words.append(word)


def _env_value_problem(value: str) -> str | None:
    if any((ord(c) < 0x20 and c not in "\n\t") or ord(c) == 0x7F for c in value):
        return "control characters other than newline and tab"
    if any(0xD800 <= ord(c) <= 0xDFFF for c in value):
        return "bytes that are not UTF-8"
    return None


def effective_service(text: str) -> ServiceExec:
    """Parse `systemctl cat UNIT` output into the effective ExecStart= and Environment=.

    Files are applied in the order printed (systemd's order): an empty `ExecStart=` or
    `Environment=` resets, later assignments win, Environment= words accumulate.
    """
    files, problems = _split_files(text)
    commands: list[ExecCommand] = []
    source: str | None = None
    env: dict[str, str] = {}
    sources: dict[str, str] = {}
    literal: set[str] = set()
    unset: list[str] = []
    env_files: list[str] = []
    for path, lines in files:
        section: str | None = None
        for line in _logical_lines(lines):
            stripped = line.strip(WHITESPACE)
            if not stripped:
                continue
            if stripped.startswith("["):
                section = stripped[1:-1] if stripped.endswith("]") else None
                if section is None:
                    problems.append(f"{path}: invalid section header {stripped!r}")
                continue
            key, eq, value = stripped.partition("=")
            key, value = key.strip(WHITESPACE), value.strip(WHITESPACE)
            if section != "Service" or not eq or not key:
                continue
            if key == "ExecStart":
                if not value:
                    commands, source = [], None
                else:
                    commands.extend(parse_command_line(value))
                    source = path
            elif key == "Environment":
                if not value:
                    env.clear()
                    sources.clear()
                    literal.clear()
                for word in _env_words(value, problems, path):
                    found: list[str] = []
                    word = expand_specifiers(word, found)
                    name, has_eq, val = word.partition("=")
                    bad = _env_value_problem(val)
                    if not has_eq or not ENV_RE.match(name) or bad:
                        problems.append(f"{path}: systemd ignores Environment= word {word!r}")
                        continue
                    env[name], sources[name] = val, path
                    if found:
                        problems.extend(f"{path}: {p}" for p in found)
                        literal.add(name)
                    else:
                        literal.discard(name)
            elif key == "UnsetEnvironment":
                if not value:
                    unset.clear()
                unset.extend(_env_words(value, problems, path))
            elif key == "EnvironmentFile":
                if not value:
                    env_files.clear()
                else:
                    env_files.append(value)
    for entry in unset:  # systemd applies UnsetEnvironment= last, at exec time
        name, has_eq, val = entry.partition("=")
        if name in env and (not has_eq or env[name] == val):
            del env[name], sources[name]
    return ServiceExec(
        files=tuple(path for path, _ in files),
        commands=tuple(commands),
        execstart_source=source,
        environment=env,
        environment_sources=sources,
        unset_environment=tuple(unset),
        environment_files=tuple(env_files),
        literal_environment=frozenset(literal & set(env)),
        problems=tuple(problems),
    )


# --- the drop-in ------------------------------------------------------------------------------


def dropin_path(unit: str) -> str:
    """Where specops writes its drop-in for `unit` (it sorts after any other drop-in)."""
    if not UNIT_RE.match(unit):
        raise FlagError("not a systemd service name like 'sglang-x.service'", value=unit)
    return f"/etc/systemd/system/{unit}.d/{DROPIN_NAME}"


def render_env(name: str, value: str) -> str:
    if not ENV_RE.match(name):
        raise FlagError("not a valid environment variable name", value=name)
    if (bad := _env_value_problem(value)) is not None:
        raise FlagError(f"systemd refuses environment values with {bad}", flag=name, value=value)
    # Environment= does specifier expansion but no $ expansion: `$` stays as it is.
    return f'Environment="{name}={escape(value, dollar=False, what=value)}"'


def argument_groups(argv: Sequence[str]) -> list[list[int]]:
    """Indices grouped one option per group: `--tp 8`, `--cuda-graph-bs 1 2 4`."""
    groups: list[list[int]] = []
    for i, word in enumerate(argv):
        if not groups or (word.startswith("-") and not _is_number(word)):
            groups.append([i])
        else:
            groups[-1].append(i)
    return groups


def _is_number(word: str) -> bool:
    try:
        float(word)
    except ValueError:
        return False
    return True


def render_dropin(
    argv: Sequence[str],
    environment: Mapping[str, str],
    *,
    unset: Iterable[str] = (),
    prefix: str = "",
) -> str:
    """The drop-in text: reset ExecStart=, set the new one, then the flag variables.

    ExecStart= is written one option per line with `\\` continuations, so the file reads
    like the command line it is. `environment` should hold only the variables specops
    manages (see `dropin_environment`); `unset` becomes UnsetEnvironment= lines.
    """
    unset = sorted(set(unset))
    if both := set(unset) & set(environment):
        raise FlagError(f"cannot both set and unset {', '.join(sorted(both))}")
    words = render_words(argv, prefix)
    lines = [" ".join(words[i] for i in group) for group in argument_groups(argv)]
    execstart = " \\\n    ".join(lines)
    out = [
        "# Managed by specops: rewritten on every flag change, so edits here are lost.",
        "# Delete it and run `systemctl daemon-reload` to go back to the unit's own command.",
        "[Service]",
        "ExecStart=",
        f"ExecStart={execstart}",
    ]
    out += [render_env(name, environment[name]) for name in sorted(environment)]
    for name in unset:
        if not ENV_RE.match(name):
            raise FlagError("not a valid environment variable name", value=name)
        out.append(f"UnsetEnvironment={name}")
    return "\n".join(out) + "\n"


def dropin_environment(
    specs: Mapping[str, FlagSpec], environment: Mapping[str, str], current: ServiceExec
) -> tuple[dict[str, str], tuple[str, ...]]:
    """The (Environment=, UnsetEnvironment=) entries our drop-in needs: the flag variables,
    and whatever else our previous drop-in set (kept as it was).

    A flag variable that is absent is unset only when the unit set (or our old drop-in unset)
    it, so a value that comes from an EnvironmentFile= we cannot see is left alone.
    """
    names = sorted({spec.env for spec in specs.values() if spec.env is not None})
    to_set = {name: environment[name] for name in names if name in environment}
    # Our own drop-in's other variables (an older profile's flag, a hand edit): rewriting the
    # file must not drop them silently, so they are carried over as they are.
    for name, value in current.environment.items():
        source = current.environment_sources.get(name, "")
        if name not in names and posixpath.basename(source) == DROPIN_NAME:
            to_set[name] = value
    known = set(current.environment) | {u.partition("=")[0] for u in current.unset_environment}
    to_unset = tuple(name for name in names if name not in environment and name in known)
    for name, value in to_set.items():
        if name in current.literal_environment and current.environment.get(name) == value:
            raise FlagError(
                f"refusing to rewrite {name}: its value holds a systemd specifier",
                value=value,
            )
    return to_set, to_unset


def dropin_for(
    specs: Mapping[str, FlagSpec],
    current: ServiceExec,
    argv: Sequence[str],
    environment: Mapping[str, str],
) -> str:
    """The drop-in that turns `current` into (argv, environment); refuses unsafe rewrites."""
    command = current.require_rewritable()
    to_set, to_unset = dropin_environment(specs, environment, current)
    return render_dropin(argv, to_set, unset=to_unset, prefix=command.prefix)
