"""Flag values: read a profile's flags from an argv and environment, validate, apply, show a diff.

A profile maps friendly names (`budget`, `cuda_graph`) to ExecStart arguments or Environment=
variables (`console.hosts.profiles.FlagSpec`); this module converts between those and typed values,
refuses values outside the profile's rules before anything touches a host, and names
configurations (`format_variant`). Pure functions, no I/O.
"""

from __future__ import annotations

import difflib
import math
import re
import string
from collections.abc import Mapping, Sequence

from console.hosts.profiles import FlagSpec, FlagValue
from console.service.catalogue import successor
from console.service.execline import FlagError, render_words
from console.service.unit import argument_groups, render_env

_TRUE = ("on", "true", "1", "yes", "enable", "enabled")
_FALSE = ("off", "false", "0", "no", "disable", "disabled")


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


NUMBER_DIGITS = 30
"""The longest number a flag takes, in characters: past it a value is refused before Python
converts it (5000 digits raised Python's own limit, a traceback)."""


def _convert(name: str, spec: FlagSpec, text: str) -> FlagValue:
    """Text → typed value for int/float/str/choice, without range checks."""
    if spec.type in ("int", "float") and len(text) > NUMBER_DIGITS:
        raise FlagError(f"a number of at most {NUMBER_DIGITS} characters", flag=name,
                        value=text[:NUMBER_DIGITS] + "…")  # fmt: skip
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
        newer = _successor(spec, argv)
        if newer is not None:
            value = read_flags({name: newer}, argv, env)[name]
            if spec.type != "switch" or value != spec.inverted:  # the newer form says so
                values[name] = value
                continue
        arg = spec.arg or ""
        found = _occurrences(argv, arg)
        if spec.type == "switch":
            if spec.value is None:
                present = any(argv[i] == arg for i in found)
            else:
                present = bool(found) and _value_at(argv, found[-1], arg) == spec.value
            values[name] = present != spec.inverted
            continue
        if not found:
            values[name] = None
            continue
        i = found[-1]
        text = _value_at(argv, i, arg)
        if text is None:
            raise FlagError(f"{arg} is the last argument and has no value", flag=name)
        values[name] = _convert(name, spec, text)
    return values


def _successor(spec: FlagSpec, argv: Sequence[str]) -> FlagSpec | None:
    """The spec in the form a newer release writes, when argv uses that form."""
    form = successor(spec.arg) if spec.arg is not None else None
    if form is None or not _occurrences(argv, form[0]):
        return None
    arg, value = form
    if spec.type == "switch":
        return spec.model_copy(update={"arg": arg, "value": value}) if value else None
    return None if value is not None else spec.model_copy(update={"arg": arg})


def _value_at(argv: Sequence[str], i: int, arg: str) -> str | None:
    """The value of the option at argv[i] (`--x=v` or `--x v`); None when nothing follows."""
    if argv[i] != arg:
        return argv[i][len(arg) + 1 :]
    return argv[i + 1] if i + 1 < len(argv) else None


def _check_range(name: str, spec: FlagSpec, number: float, text: str) -> None:
    low, high = spec.min, spec.max
    if (low is not None and number < low) or (high is not None and number > high):
        if high is None:
            rule = f"must be at least {_bound(low)}"
        elif low is None:
            rule = f"must be at most {_bound(high)}"
        else:
            rule = f"must be between {_bound(low)} and {_bound(high)}"
        raise FlagError(rule, flag=name, value=text)


def _bound(limit: float | None) -> str:
    assert limit is not None
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
        if spec.type == "switch" and spec.value is not None:
            found = _occurrences(new_argv, arg)
            current = _value_at(new_argv, found[-1], arg) if found else None
            if value != spec.inverted:
                new_argv = _set_argument(new_argv, arg, spec.value)
            elif current == spec.value:  # another value (`breakable`) is not this switch's
                new_argv = _set_argument(new_argv, arg, None)
            continue
        if spec.type == "switch":
            present = value != spec.inverted
            if not present:
                new_argv = [w for i, w in enumerate(new_argv) if i == 0 or w != arg]
            elif arg not in new_argv[1:]:
                new_argv.append(arg)
            continue
        new_argv = _set_argument(new_argv, arg, None if value is None else _arg_text(value))
    return new_argv, new_env


def remove_argument(argv: Sequence[str], arg: str, switch: bool) -> list[str]:
    """`argv` without `arg` (and, unless it is a switch, the value that goes with it)."""
    if switch:
        return [w for i, w in enumerate(argv) if i == 0 or w != arg]
    return _set_argument(list(argv), arg, None)


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
    words = render_words(argv, prefix)
    lines = [" ".join(words[i] for i in group) for group in argument_groups(argv)]
    lines = [lines[0]] + ["    " + line for line in lines[1:]]
    return lines + [render_env(name, env[name]) for name in sorted(env)]


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


MAX_VARIANT_CHARS = 100
"""The longest configuration name: with the unit's and host's names it stays well inside a
file name's 255 bytes."""


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
    if len(name) > MAX_VARIANT_CHARS:
        raise FlagError(
            f"the variant would be {len(name)} characters, at most {MAX_VARIANT_CHARS}: it goes "
            "into file names beside the unit's and host's",
            value=template,
        )
    return re.sub(r"^\.+", lambda m: "_" * len(m.group()), name)  # never `.`, `..` or hidden
