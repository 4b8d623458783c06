"""The ExecStart argv model: read a unit as systemd does, change flags, write it back exactly.

specops changes SGLang flags by replacing the unit's ExecStart= in a drop-in. That is only safe
if we read the command the way systemd reads it and write text that systemd reads back as
exactly the argv we meant: one stray `%`, `$` or quote and the server starts with a different
command, or not at all. This module is that translation and nothing else: pure functions over
text, no I/O, so every rule is testable (and tested against the real parser where present).

The rules follow systemd's own parser (src/basic/extract-word.c, src/core/load-fragment.c,
src/basic/env-util.c) and its manuals: systemd.syntax(7) for continuations and comments,
systemd.service(5) "Command lines" for quoting, escapes, prefixes and `$`, systemd.unit(5) for
specifiers and drop-in order, systemd.exec(5) for Environment= ("The "$" character has no
special meaning"). Anything we cannot reproduce exactly (a `$VAR` or `${VAR}` expansion, a
`%i` specifier) is kept literally and reported, so the caller refuses to rewrite the line
rather than corrupt it.
"""

from __future__ import annotations

import difflib
import math
import re
import string
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeAlias

from console.profiles import ENV_RE, UNIT_RE, FlagSpec

FlagValue: TypeAlias = int | float | str | bool | None
"""A flag's value: int/float/str (choice is a str), bool for switches, None when absent."""

DROPIN_NAME = "zz-specops.conf"
"""Sorts after every usual drop-in name, so our ExecStart= is the one that counts."""

_WS = " \t\n\r"  # systemd's WHITESPACE: the word separators
_PREFIX_CHARS = "-@:+!"
_SIMPLE_ESCAPES = {
    "a": "\a",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "v": "\v",
    "\\": "\\",
    '"': '"',
    "'": "'",
    "s": " ",
}
_RENDER_ESCAPES = {"\a": "a", "\b": "b", "\f": "f", "\n": "n", "\r": "r", "\t": "t", "\v": "v"}
_HEX = "0123456789abcdefABCDEF"
_OCT = "01234567"
_ANSI_RE = re.compile(r"\x1b\[[0-9;]*m")
_EOL_RE = re.compile(r"\r\n|\r|\n|\x00")  # systemd's read_line(); not str.splitlines()
_TRUE = ("on", "true", "1", "yes", "enable", "enabled")
_FALSE = ("off", "false", "0", "no", "disable", "disabled")


class FlagError(ValueError):
    """A flag value, command line or template that specops refuses. Names flag, value and rule."""

    def __init__(self, rule: str, *, flag: str | None = None, value: object = None) -> None:
        self.flag = flag
        self.value = value
        self.rule = rule
        where = f"flag {flag!r}: " if flag is not None else ""
        what = f"value {value!r}: " if value is not None else ""
        super().__init__(f"{where}{what}{rule}")


class _SyntaxProblem(Exception):
    """Text systemd's extract_first_word() rejects (bad escape, unbalanced quote)."""


# --- words: quoting and C escapes (systemd.service(5) "Command lines") -----------------------


def _unescape_one(text: str, j: int) -> tuple[int, bytes]:
    """Decode the escape whose letter is at text[j]: (characters consumed, bytes produced)."""
    if j >= len(text):
        raise _SyntaxProblem("trailing backslash")
    c = text[j]
    if c in _SIMPLE_ESCAPES:
        return 1, _SIMPLE_ESCAPES[c].encode()
    if c == "x" or c in _OCT:
        digits, width, base = (_HEX, 2, 16) if c == "x" else (_OCT, 3, 8)
        start = j + 1 if c == "x" else j
        code = text[start : start + width]
        if len(code) != width or any(d not in digits for d in code):
            raise _SyntaxProblem(f"bad escape \\{text[j : j + width + 1]}")
        byte = int(code, base)
        if byte == 0 or byte > 255:
            raise _SyntaxProblem(f"escape \\{text[j : start + width]} is NUL or above 255")
        return start + width - j, bytes([byte])  # \x and octal give raw bytes, not code points
    if c in ("u", "U"):
        width = 4 if c == "u" else 8
        code = text[j + 1 : j + 1 + width]
        if len(code) != width or any(d not in _HEX for d in code):
            raise _SyntaxProblem(f"bad escape \\{text[j : j + width + 1]}")
        point = int(code, 16)
        invalid = point >= 0x110000 or 0xD800 <= point <= 0xDFFF
        invalid = invalid or 0xFDD0 <= point <= 0xFDEF or (point & 0xFFFE) == 0xFFFE
        if point == 0 or (c == "U" and invalid):
            raise _SyntaxProblem(f"escape \\{c}{code} is not a valid character")
        return 1 + width, chr(point).encode("utf-8", "surrogatepass")
    raise _SyntaxProblem(f"unknown escape \\{c}")


def _extract_word(text: str, i: int) -> tuple[str | None, int]:
    """One word from text[i:] as extract_first_word(EXTRACT_UNQUOTE|EXTRACT_CUNESCAPE).

    Quotes may open mid-word, escapes work inside both kinds of quotes, and separators after
    the word are skipped. Returns (None, end) when only whitespace is left.
    """
    n = len(text)
    while i < n and text[i] in _WS:
        i += 1
    if i >= n:
        return None, i
    out = bytearray()
    quote = ""
    while i < n:
        c = text[i]
        if c == "\\":
            used, data = _unescape_one(text, i + 1)
            out += data
            i += 1 + used
        elif quote:
            if c == quote:
                quote = ""
            else:
                out += c.encode("utf-8", "surrogateescape")
            i += 1
        elif c in "'\"":
            quote = c
            i += 1
        elif c in _WS:
            while i < n and text[i] in _WS:
                i += 1
            break
        else:
            out += c.encode("utf-8", "surrogateescape")
            i += 1
    if quote:
        raise _SyntaxProblem(f"unbalanced {quote} quote")
    return out.decode("utf-8", "surrogateescape"), i


def _expand_specifiers(word: str, problems: list[str]) -> str:
    """`%%` → `%`; any other specifier is kept literally and reported (systemd.unit(5))."""
    out: list[str] = []
    i = 0
    while i < len(word):
        if word[i] != "%":
            out.append(word[i])
            i += 1
        elif word[i + 1 : i + 2] == "%":
            out.append("%")
            i += 2
        else:
            spec = word[i : i + 2]
            problems.append(f"specifier {spec!r} in {word!r} is expanded by systemd")
            out.append(spec)
            i += 2
    return "".join(out)


def _expand_dollars(word: str, problems: list[str]) -> str:
    """systemd's replace_env_argv() on one argument: `$$` → `$`, variables reported.

    A whole-word `$NAME` is replaced by the variable split into words and `${NAME}` by its
    value; we cannot know either, so they stay literal and the line becomes read-only. A `$`
    before any other character is literal, as in systemd.
    """
    if word.startswith("$") and word[1:2] not in ("{", "$"):
        problems.append(f"argument {word!r} is a $VARIABLE expanded by systemd")
        return word
    out: list[str] = []
    i = 0
    while i < len(word):
        pair = word[i : i + 2]
        if pair == "$$":
            out.append("$")
            i += 2
            continue
        if pair == "${":
            problems.append(f"argument {word!r} uses ${{…}} expanded by systemd")
        out.append(word[i])
        i += 1
    return "".join(out)


def _split_prefix(word: str) -> tuple[str, str]:
    """Split `-`, `@`, `:`, `+`, `!`, `!!` off the executable word, as config_parse_exec()."""
    seen: set[str] = set()
    privilege = ""
    i = 0
    for c in word:
        if c in "-@:" and c not in seen:
            seen.add(c)
        elif c in "+!" and not privilege:
            privilege = c
        elif c == "!" and privilege == "!":
            privilege = "!!"
        else:
            break
        i += 1
    return word[:i], word[i:]


def _executable_problem(path: str) -> str | None:
    """Why systemd (or we) would not accept `path` as the executable, or None."""
    if not path:
        return "the executable is empty"
    if "$" in path:
        return f"the executable {path!r} contains '$'"
    if any(ord(c) < 0x20 or ord(c) == 0x7F or c in "\\\"'" for c in path):
        return f"the executable {path!r} contains quotes, backslashes or control characters"
    if path.endswith("/"):
        return f"the executable {path!r} is a directory"
    if not path.startswith("/") and "/" in path:
        return f"the executable {path!r} is neither an absolute path nor a plain file name"
    return None


@dataclass(frozen=True)
class ExecCommand:
    """One parsed command line: what the process gets as argv, plus what we could not model."""

    argv: tuple[str, ...]
    """argv[0] is the executable path; with the `@` prefix argv[1] is the argv[0] override."""
    prefix: str = ""
    """The executable's prefix characters as written (`-`, `@`, `:`, `+`, `!`, `!!`)."""
    unsupported: tuple[str, ...] = ()
    """Why this line must not be rewritten (variables, specifiers, syntax systemd rejects)."""

    @property
    def rewritable(self) -> bool:
        return not self.unsupported and bool(self.argv)


def parse_command_line(value: str) -> list[ExecCommand]:
    """Parse an ExecStart= value into commands (a lone `;` separates commands, as in systemd)."""
    commands: list[ExecCommand] = []
    n = len(value)
    p = 0
    while True:
        problems: list[str] = []
        try:
            first, p = _extract_word(value, p)
        except _SyntaxProblem as exc:
            commands.append(ExecCommand((), unsupported=(f"{exc} in {value!r}",)))
            return commands
        if first is None:
            return commands
        if first == ";":
            continue
        prefix, path = _split_prefix(first)
        path = _expand_specifiers(path, problems)
        if (problem := _executable_problem(path)) is not None:
            problems.append(problem)
        argv = [path]
        while p < n:
            if value[p] == ";" and value[p + 1 : p + 2] in ("", *_WS):
                p += 1
                while p < n and value[p] in _WS:
                    p += 1
                break
            if value.startswith("\\;", p) and value[p + 2 : p + 3] in ("", *_WS):
                argv.append(";")
                p += 2
                while p < n and value[p] in _WS:
                    p += 1
                continue
            try:
                word, p = _extract_word(value, p)
            except _SyntaxProblem as exc:
                problems.append(f"{exc} in {value!r}")
                p = n
                break
            if word is None:
                break
            argv.append(_expand_specifiers(word, problems))
        if "@" in prefix and len(argv) < 2:
            problems.append("the '@' prefix needs an argv[0] after the executable")
        if ":" not in prefix:
            argv[1:] = [_expand_dollars(word, problems) for word in argv[1:]]
        commands.append(ExecCommand(tuple(argv), prefix, tuple(problems)))
        if p >= n:
            return commands


def parse_execstart(value: str) -> ExecCommand:
    """Parse an ExecStart= value that must hold exactly one command."""
    commands = parse_command_line(value)
    if len(commands) != 1:
        raise FlagError(f"ExecStart= must hold exactly one command, found {len(commands)}")
    return commands[0]


def _escape(text: str, *, dollar: bool, what: str) -> str:
    """Escape for a systemd unit value: C escapes, `%%`, and `$$` where `$` is special."""
    out: list[str] = []
    for c in text:
        code = ord(c)
        if c == "\\" or c == '"':
            out.append("\\" + c)
        elif c == "%":
            out.append("%%")
        elif c == "$" and dollar:
            out.append("$$")
        elif c in _RENDER_ESCAPES:
            out.append("\\" + _RENDER_ESCAPES[c])
        elif code == 0:
            raise FlagError("systemd cannot pass a NUL character", value=what)
        elif 0xDC80 <= code <= 0xDCFF:  # a raw byte kept by surrogateescape
            out.append(f"\\x{code - 0xDC00:02x}")
        elif 0xD800 <= code <= 0xDFFF:
            raise FlagError("lone surrogate code points cannot be written", value=what)
        elif c == " " or c.isprintable():
            out.append(c)
        else:  # control and invisible characters: their UTF-8 bytes, each as \xNN
            out.extend(f"\\x{b:02x}" for b in c.encode())
    return "".join(out)


def _quote(word: str, *, dollar: bool) -> str:
    escaped = _escape(word, dollar=dollar, what=word)
    needs_quotes = not word or word[0] in "#;" or any(c.isspace() or c in "'\"" for c in word)
    return f'"{escaped}"' if needs_quotes else escaped


def _render_words(argv: Sequence[str], prefix: str) -> list[str]:
    if not argv:
        raise FlagError("an ExecStart= command needs at least the executable")
    if _split_prefix(prefix + "/") != (prefix, "/"):
        raise FlagError("not a valid ExecStart= prefix (use -, @, :, +, ! or !!)", value=prefix)
    path = argv[0]
    problem = _executable_problem(path)
    if problem is None and path[0] in _PREFIX_CHARS:
        problem = f"the executable {path!r} starts with a prefix character"
    if problem is not None:
        raise FlagError(problem, value=path)
    if "@" in prefix and len(argv) < 2:
        raise FlagError("the '@' prefix needs an argv[0] after the executable", value=prefix)
    dollar = ":" not in prefix  # with ':' systemd does no $ processing at all
    return [prefix + _quote(path, dollar=dollar)] + [_quote(w, dollar=dollar) for w in argv[1:]]


def render_execstart(argv: Sequence[str], prefix: str = "") -> str:
    """The ExecStart= value (one line) that systemd parses back into exactly `argv`."""
    return " ".join(_render_words(argv, prefix))


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


def _logical_lines(lines: list[str]) -> Iterator[str]:
    """Join `\\` continuations and drop comments, as systemd's config_parse() does.

    The continuation backslash becomes a space; comment lines inside a continuation are
    skipped; `\\\\` at the end is an escaped backslash, not a continuation.
    """
    pending: str | None = None
    for index, raw in enumerate(lines):
        line = raw.removeprefix("\ufeff") if index == 0 else raw
        lead = line.lstrip(_WS)
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
            word, p = _extract_word(value, p)
        except _SyntaxProblem as exc:
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
            stripped = line.strip(_WS)
            if not stripped:
                continue
            if stripped.startswith("["):
                section = stripped[1:-1] if stripped.endswith("]") else None
                if section is None:
                    problems.append(f"{path}: invalid section header {stripped!r}")
                continue
            key, eq, value = stripped.partition("=")
            key, value = key.strip(_WS), value.strip(_WS)
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
                    word = _expand_specifiers(word, found)
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


def _render_env(name: str, value: str) -> str:
    if not ENV_RE.match(name):
        raise FlagError("not a valid environment variable name", value=name)
    if (bad := _env_value_problem(value)) is not None:
        raise FlagError(f"systemd refuses environment values with {bad}", flag=name, value=value)
    # Environment= does specifier expansion but no $ expansion: `$` stays as it is.
    return f'Environment="{name}={_escape(value, dollar=False, what=value)}"'


def _argument_groups(argv: Sequence[str]) -> list[list[int]]:
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
    words = _render_words(argv, prefix)
    lines = [" ".join(words[i] for i in group) for group in _argument_groups(argv)]
    execstart = " \\\n    ".join(lines)
    out = [
        "# Managed by specops: rewritten on every flag change, so edits here are lost.",
        "# Delete it and run `systemctl daemon-reload` to go back to the unit's own command.",
        "[Service]",
        "ExecStart=",
        f"ExecStart={execstart}",
    ]
    out += [_render_env(name, environment[name]) for name in sorted(environment)]
    for name in unset:
        if not ENV_RE.match(name):
            raise FlagError("not a valid environment variable name", value=name)
        out.append(f"UnsetEnvironment={name}")
    return "\n".join(out) + "\n"


def dropin_environment(
    specs: Mapping[str, FlagSpec], environment: Mapping[str, str], current: ServiceExec
) -> tuple[dict[str, str], tuple[str, ...]]:
    """The (Environment=, UnsetEnvironment=) entries our drop-in needs: flag variables only.

    A flag variable that is absent is unset only when the unit set (or our old drop-in unset)
    it, so a value that comes from an EnvironmentFile= we cannot see is left alone.
    """
    names = sorted({spec.env for spec in specs.values() if spec.env is not None})
    to_set = {name: environment[name] for name in names if name in environment}
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


# --- flag values ------------------------------------------------------------------------------


def format_value(value: FlagValue) -> str:
    """A value as shown to people: `on`/`off` for switches, `unset` for None."""
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, float):
        return repr(value)
    return str(value)


def _convert(name: str, spec: FlagSpec, text: str) -> FlagValue:
    """Text → typed value for int/float/str/choice, without range checks."""
    if spec.type == "int":
        if not re.fullmatch(r"[+-]?[0-9]+", text):
            raise FlagError("must be a whole number", flag=name, value=text)
        return int(text)
    if spec.type == "float":
        if not re.fullmatch(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?", text):
            raise FlagError("must be a number", flag=name, value=text)
        number = float(text)
        if not math.isfinite(number):
            raise FlagError("must be a finite number", flag=name, value=text)
        return number
    return text


def _occurrences(argv: Sequence[str], arg: str) -> list[int]:
    """Indices of `arg` (two-word form) and `arg=…` in argv, skipping the executable."""
    return [i for i, w in enumerate(argv) if i > 0 and (w == arg or w.startswith(arg + "="))]


def read_flags(
    specs: Mapping[str, FlagSpec], argv: Sequence[str], env: Mapping[str, str]
) -> dict[str, FlagValue]:
    """Every flag's current value: the last occurrence wins, as with argparse."""
    values: dict[str, FlagValue] = {}
    for name, spec in specs.items():
        if spec.env is not None:
            text = env.get(spec.env)
            values[name] = None if text is None else _convert(name, spec, text)
            continue
        arg = spec.arg or ""
        found = _occurrences(argv, arg)
        if spec.type == "switch":
            present = any(argv[i] == arg for i in found)
            values[name] = present != spec.inverted
            continue
        if not found:
            values[name] = None
            continue
        i = found[-1]
        if argv[i] != arg:
            text = argv[i][len(arg) + 1 :]
        elif i + 1 < len(argv):
            text = argv[i + 1]
        else:
            raise FlagError(f"{arg} is the last argument and has no value", flag=name)
        values[name] = _convert(name, spec, text)
    return values


def _check_range(name: str, spec: FlagSpec, number: float, text: str) -> None:
    low, high = spec.min, spec.max
    if (low is not None and number < low) or (high is not None and number > high):
        raise FlagError(f"must be between {_bound(low)} and {_bound(high)}", flag=name, value=text)


def _bound(limit: float | None) -> str:
    if limit is None:
        return "(no limit)"
    return str(int(limit)) if float(limit).is_integer() else repr(float(limit))


def validate_value(name: str, spec: FlagSpec, text: str) -> FlagValue:
    """Turn what a person typed (`16`, `off`, `unset`) into a value the flag accepts."""
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in text):
        rule = "must not contain NUL, newlines or other control characters"
        raise FlagError(rule, flag=name, value=text)
    clean = text.strip()
    if spec.type == "switch":
        if clean.lower() in _TRUE:
            return True
        if clean.lower() in _FALSE:
            return False
        raise FlagError("a switch is on/off, true/false, yes/no or 1/0", flag=name, value=text)
    if clean == "unset":
        return None
    if not clean:
        raise FlagError("must not be empty (use 'unset' to remove the flag)", flag=name, value=text)
    value = _convert(name, spec, clean)
    if isinstance(value, int | float):
        _check_range(name, spec, value, clean)
    if spec.type == "choice" and spec.choices and value not in spec.choices:
        raise FlagError(f"must be one of: {', '.join(spec.choices)}", flag=name, value=text)
    return value


def _check_change(name: str, spec: FlagSpec, value: FlagValue) -> FlagValue:
    """Re-validate a value handed to apply_flags (it may not come from validate_value)."""
    if spec.type == "switch":
        if not isinstance(value, bool):
            raise FlagError("a switch takes True or False", flag=name, value=value)
        return value
    if value is None:
        return None
    if isinstance(value, bool):
        raise FlagError(f"a {spec.type} flag does not take on/off", flag=name, value=value)
    if spec.type == "float" and isinstance(value, int):
        value = float(value)
    expected = {"int": int, "float": float}.get(spec.type, str)
    if not isinstance(value, expected):
        raise FlagError(f"a {spec.type} flag needs a {expected.__name__}", flag=name, value=value)
    result = validate_value(name, spec, _arg_text(value))
    if result is None:  # a str flag literally set to "unset"
        raise FlagError("'unset' removes a flag; pass None instead", flag=name, value=value)
    return result


def _arg_text(value: int | float | str) -> str:
    return repr(value) if isinstance(value, float) else str(value)


def apply_flags(
    specs: Mapping[str, FlagSpec],
    argv: Sequence[str],
    env: Mapping[str, str],
    changes: Mapping[str, FlagValue],
) -> tuple[list[str], dict[str, str]]:
    """New (argv, env) with `changes` applied; untouched arguments keep their place and form.

    A present argument has its value replaced where it stands (`--x 8` or `--x=8`); an absent
    one is appended; None removes it. Switches are added or removed honouring `inverted`.
    Values starting with `-` are written as `--x=-v`, so argparse cannot take them for options.
    """
    new_argv = list(argv)
    new_env = dict(env)
    if not new_argv:
        raise FlagError("there is no command to change")
    for name, raw in changes.items():
        spec = specs.get(name)
        if spec is None:
            known = ", ".join(sorted(specs)) or "none"
            raise FlagError(f"no such flag in the profile (known: {known})", flag=name, value=raw)
        value = _check_change(name, spec, raw)
        if spec.env is not None:
            if value is None:
                new_env.pop(spec.env, None)
            else:
                new_env[spec.env] = _arg_text(value)
            continue
        arg = spec.arg or ""
        if spec.type == "switch":
            present = value != spec.inverted
            if not present:
                new_argv = [w for i, w in enumerate(new_argv) if i == 0 or w != arg]
            elif arg not in new_argv[1:]:
                new_argv.append(arg)
            continue
        new_argv = _set_argument(new_argv, arg, None if value is None else _arg_text(value))
    return new_argv, new_env


def _set_argument(argv: list[str], arg: str, text: str | None) -> list[str]:
    """Replace, append or (text None) remove every occurrence of an option with a value."""
    out: list[str] = []
    found = False
    i = 0
    while i < len(argv):
        word = argv[i]
        two_word = i > 0 and word == arg
        if not two_word and not (i > 0 and word.startswith(arg + "=")):
            out.append(word)
            i += 1
            continue
        found = True
        i += 2 if two_word else 1
        if text is None:
            continue
        if two_word and not text.startswith("-"):
            out += [arg, text]
        else:
            out.append(f"{arg}={text}")
    if not found and text is not None:
        out += [f"{arg}={text}"] if text.startswith("-") else [arg, text]
    return out


# --- showing a change -------------------------------------------------------------------------


def _display_lines(argv: Sequence[str], env: Mapping[str, str], prefix: str) -> list[str]:
    words = _render_words(argv, prefix)
    lines = [" ".join(words[i] for i in group) for group in _argument_groups(argv)]
    lines = [lines[0]] + ["    " + line for line in lines[1:]]
    return lines + [_render_env(name, env[name]) for name in sorted(env)]


def diff_argv(
    old: Sequence[str],
    new: Sequence[str],
    *,
    old_env: Mapping[str, str] | None = None,
    new_env: Mapping[str, str] | None = None,
    prefix: str = "",
) -> str:
    """A unified diff of two commands (one option per line) and environments; "" if equal."""
    before = _display_lines(old, old_env or {}, prefix)
    after = _display_lines(new, new_env or {}, prefix)
    if before == after:
        return ""
    context = max(len(before), len(after))
    diff = difflib.unified_diff(before, after, "current", "proposed", n=context, lineterm="")
    return "\n".join(diff) + "\n"


# --- variant names ----------------------------------------------------------------------------


def format_variant(template: str, values: Mapping[str, FlagValue]) -> str:
    """Name a configuration for artifacts: `{nvls}b{budget}t{topk}` → `nvlsb8t4`.

    A switch renders as its flag name when on and as nothing when off; an absent value as
    `x`. The result keeps only `[A-Za-z0-9._-]` (anything else becomes `_`).
    """
    out: list[str] = []
    try:
        parsed = list(string.Formatter().parse(template))
    except ValueError as exc:
        raise FlagError(f"bad variant template: {exc}", value=template) from None
    for literal, name, spec, conversion in parsed:
        out.append(literal)
        if name is None:
            continue
        if name not in values:
            known = ", ".join(sorted(values)) or "none"
            raise FlagError(f"unknown field in variant template (known: {known})", flag=name)
        if conversion:
            raise FlagError(f"conversion !{conversion} is not supported", flag=name)
        value = values[name]
        if isinstance(value, bool):
            out.append(name if value else "")
        elif value is None:
            out.append("x")
        elif spec:
            try:
                out.append(format(value, spec))
            except ValueError as exc:
                raise FlagError(f"bad format {spec!r}: {exc}", flag=name, value=value) from None
        else:
            out.append(format_value(value))
    name = re.sub(r"[^A-Za-z0-9._-]", "_", "".join(out))
    return re.sub(r"^\.+", lambda m: "_" * len(m.group()), name)  # never `.`, `..` or hidden
