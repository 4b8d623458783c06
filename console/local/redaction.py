"""Secrets out of everything specops writes: the one redaction, for commands and free text.

The audit log, the reproduction package (unit copy, `current_execstart.txt`, metadata, the
journal excerpt) and `specops verify` all use this module, so a secret-looking value is
hidden the same way everywhere: the value of an option or variable whose name has a secret
part (`--api-key`, `--token`, `HF_TOKEN`, `DB_PASSWORD`, `GH_PAT`, `SMTP_PASS`, …, and any
name a profile marks `secret = true`), an `Authorization: Bearer` credential, and the
password of a `user:pass@` URL. Each becomes `***`. A package exists to be shared.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Collection

from console.hosts.profiles import SECRET_MASK

REDACTED = SECRET_MASK

SECRET_PARTS = frozenset(
    {
        "key",
        "keys",
        "apikey",
        "token",
        "secret",
        "secrets",
        "password",
        "passwd",
        "pass",
        "passphrase",
        "pat",
        "credential",
        "credentials",
    }
)
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_BEARER = re.compile(r"(?i)\b(bearer\s+)([^\s'\",;]+)")
_URL_PASSWORD = re.compile(
    r"(?<![A-Za-z0-9+.-])([A-Za-z][A-Za-z0-9+.-]*://[^/\s:@'\"]*:)([^@\s/'\"]+)(@)"
)
_OPTION_VALUE = re.compile(
    # The value: quoted, or one word not starting with `--` or being a short option (`-v`);
    # a quote never closed (`--api-key 'sk-1`) takes the rest of the word.
    r"""(?<![\w-])(--?[A-Za-z][\w.-]*)(=|[ \t]+)"""
    r"""("[^"]*"|'[^']*'|["'][^\s]*|(?!--)(?!-[A-Za-z](?:\s|$))[^\s"'][^\s"']*)"""
)
_HEADER = re.compile(r"(?<![\w#-])([A-Za-z][\w-]*)(:[ \t]*)([^\s'\",;]+)")
"""`X-Api-Key: VALUE`, an HTTP header as curl and logs write it."""
_NESTED = 64
"""`Environment=NAME=VALUE` nests once, a journal cursor (`s=…;i=…;b=…;m=…;t=…;x=…`) six deep,
a query string as deep as its parameters; a value nested deeper than this is hidden whole."""
_NOT_SECRET_LAST = frozenset({"file", "path", "dir", "filename"})
"""`--key-file PATH` names where a secret is kept: a path is no secret."""
_QUOTED_ASSIGNMENT = re.compile(r"""(["'])([A-Za-z_][\w.]*)=(.*?)\1""")
_ASSIGNMENT = re.compile(
    # A name starts where a run of name characters starts (after leading dots or dashes), never
    # inside one: each run is scanned once, so `x.x.x.…` costs its length, not its square.
    r"""(?<![\w.-])([.-]*)([A-Za-z_][\w.-]*)(=)("[^"]*"|'[^']*'|[^\s"',)]+)"""
)


def is_secret_name(name: str, extra: Collection[str] = ()) -> bool:
    """`--api-key`, `--hf_token`, `HF_TOKEN`, `DB_PASSWORD`, `GH_PAT`; not `--num-draft-tokens`."""
    if name in extra or name.lstrip("-") in extra:
        return True
    parts = re.split(r"[-_.]+", name.strip("-").lower())
    if parts[-1] in _NOT_SECRET_LAST:
        return False
    return any(part in SECRET_PARTS for part in parts)


def _is_option(word: str) -> bool:
    """`--port`, `-v`: what ends a secret option's missing value; `-s3cr3t` is a value."""
    return word.startswith("--") or re.fullmatch(r"-[A-Za-z]", word) is not None


def _hide_credentials(text: str) -> str:
    text = _BEARER.sub(lambda m: m.group(1) + REDACTED, text)
    return _URL_PASSWORD.sub(lambda m: m.group(1) + REDACTED + m.group(3), text)


def redact(command: str, extra: Collection[str] = ()) -> str:
    """A shell command with secret-looking values replaced; unchanged when there are none.

    `extra`: more option or variable names to hide (a profile's `secret = true` flags).
    """
    try:
        words = shlex.split(command)
    except ValueError:
        # Not valid shell (it never is for our own commands): hide what free text would.
        return redact_text(command, extra)
    out: list[str] = []
    hide_next = False
    changed = False
    for word in words:
        if hide_next and not _is_option(word):
            out.append(REDACTED)
            hide_next, changed = False, True
            continue
        hide_next = False
        name, eq, _ = word.partition("=")
        is_option = word.startswith("-")
        if (is_option or (eq and _ENV_NAME.match(name))) and is_secret_name(name, extra):
            if eq:
                out.append(f"{name}={REDACTED}")
                changed = True
                continue
            hide_next = is_option
        hidden = redact_text(word, extra)  # a header, a URL's password, a bearer token
        changed = changed or hidden != word
        out.append(hidden)
    return shlex.join(out) if changed else command


def redact_dropin(text: str, extra: Collection[str] = ()) -> str:
    """A unit drop-in with secret values hidden (ExecStart words, Environment= assignments);
    `extra` as for `redact`."""
    lines = []
    for line in text.splitlines():
        key, eq, rest = line.partition("=")
        if eq and key.strip() == "Environment":
            lines.append(f"{key}={redact(rest, extra)}")
        else:
            lines.append(redact(line, extra))
    return "\n".join(lines) + ("\n" if text.endswith("\n") else "")


def _quoted(value: str) -> str:
    """`***` in the quotes `value` had, so the text around it still parses."""
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[0] + REDACTED + value[0]
    return REDACTED


def redact_text(text: str, extra: Collection[str] = ()) -> str:
    """Free text (a unit file, journal lines, an ExecStart) with secret values replaced.

    Covers `--api-key VALUE` (`-VALUE` too, and a quote never closed), `--token=VALUE`,
    `NAME=VALUE` (systemd `Environment=` words, shell assignments, `x-api-key=VALUE`),
    `api_key='VALUE'` (SGLang's logged ServerArgs), `X-Api-Key: VALUE`, `Authorization:
    Bearer VALUE` and `scheme://user:VALUE@host`. `--key-file PATH` is left alone: a path
    is no secret.
    """

    def option(m: re.Match[str]) -> str:
        if not is_secret_name(m.group(1), extra):
            return m.group(0)
        return m.group(1) + m.group(2) + _quoted(m.group(3))

    def assignment(m: re.Match[str], depth: int = 0) -> str:
        lead, name, eq, value = m.groups()
        if value == REDACTED:
            return m.group(0)
        if is_secret_name(name, extra) or depth == _NESTED:
            # `a=a=a=…` deeper than any real assignment nests: hidden rather than followed
            return lead + name + eq + _quoted(value)
        # `Environment="HF_TOKEN=…"`: look inside
        return lead + name + eq + _ASSIGNMENT.sub(lambda i: assignment(i, depth + 1), value)

    def header(m: re.Match[str]) -> str:
        if not is_secret_name(m.group(1), extra) or m.group(3) == REDACTED:
            return m.group(0)
        return m.group(1) + m.group(2) + REDACTED

    def quoted_assignment(m: re.Match[str]) -> str:  # `"HF_TOKEN=two words"`: all of it
        if not is_secret_name(m.group(2), extra):
            return m.group(0)
        return f"{m.group(1)}{m.group(2)}={REDACTED}{m.group(1)}"

    text = _hide_credentials(text)
    text = _OPTION_VALUE.sub(option, text)
    text = _HEADER.sub(header, text)
    text = _QUOTED_ASSIGNMENT.sub(quoted_assignment, text)
    return _ASSIGNMENT.sub(assignment, text)


def unredacted(text: str) -> list[int]:
    """The 1-based numbers of the lines that still hold a secret-looking value."""
    return [n for n, line in enumerate(text.splitlines(), start=1) if redact_text(line) != line]
