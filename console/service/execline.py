"""systemd's command-line syntax: read an ExecStart= line as systemd does, write one it reads back.

specops changes SGLang flags by replacing the unit's ExecStart= in a drop-in. That is only safe
if we read the command the way systemd reads it and write text that systemd reads back as
exactly the argv we meant: one stray `%`, `$` or quote and the server starts with a different
command, or not at all. This module is that word syntax and nothing else: pure functions over
text, no I/O, so every rule is testable (and tested against the real parser where present).

The rules follow systemd's own parser (src/basic/extract-word.c, src/core/load-fragment.c) and
systemd.service(5) "Command lines" for quoting, escapes, prefixes and `$`, systemd.unit(5) for
specifiers. Anything we cannot reproduce exactly (a `$VAR` or `${VAR}` expansion, a `%i`
specifier) is kept literally and reported, so the caller refuses to rewrite the line rather than
corrupt it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

WHITESPACE = " \t\n\r"  # systemd's WHITESPACE: the word separators
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


class FlagError(ValueError):
    """A flag value, command line or template that specops refuses. Names flag, value and rule."""

    def __init__(self, rule: str, *, flag: str | None = None, value: object = None) -> None:
        self.flag = flag
        self.value = value
        self.rule = rule
        where = f"flag {flag!r}: " if flag is not None else ""
        what = f"value {value!r}: " if value is not None else ""
        super().__init__(f"{where}{what}{rule}")


class SyntaxProblem(Exception):
    """Text systemd's extract_first_word() rejects (bad escape, unbalanced quote)."""


# --- words: quoting and C escapes (systemd.service(5) "Command lines") -----------------------


def _unescape_one(text: str, j: int) -> tuple[int, bytes]:
    """Decode the escape whose letter is at text[j]: (characters consumed, bytes produced)."""
    if j >= len(text):
        raise SyntaxProblem("trailing backslash")
    c = text[j]
    if c in _SIMPLE_ESCAPES:
        return 1, _SIMPLE_ESCAPES[c].encode()
    if c == "x" or c in _OCT:
        digits, width, base = (_HEX, 2, 16) if c == "x" else (_OCT, 3, 8)
        start = j + 1 if c == "x" else j
        code = text[start : start + width]
        if len(code) != width or any(d not in digits for d in code):
            raise SyntaxProblem(f"bad escape \\{text[j : j + width + 1]}")
        byte = int(code, base)
        if byte == 0 or byte > 255:
            raise SyntaxProblem(f"escape \\{text[j : start + width]} is NUL or above 255")
        return start + width - j, bytes([byte])  # \x and octal give raw bytes, not code points
    if c in ("u", "U"):
        width = 4 if c == "u" else 8
        code = text[j + 1 : j + 1 + width]
        if len(code) != width or any(d not in _HEX for d in code):
            raise SyntaxProblem(f"bad escape \\{text[j : j + width + 1]}")
        point = int(code, 16)
        invalid = point >= 0x110000 or 0xD800 <= point <= 0xDFFF
        invalid = invalid or 0xFDD0 <= point <= 0xFDEF or (point & 0xFFFE) == 0xFFFE
        if point == 0 or (c == "U" and invalid):
            raise SyntaxProblem(f"escape \\{c}{code} is not a valid character")
        return 1 + width, chr(point).encode("utf-8", "surrogatepass")
    raise SyntaxProblem(f"unknown escape \\{c}")


def extract_word(text: str, i: int) -> tuple[str | None, int]:
    """One word from text[i:] as extract_first_word(EXTRACT_UNQUOTE|EXTRACT_CUNESCAPE).

    Quotes may open mid-word, escapes work inside both kinds of quotes, and separators after
    the word are skipped. Returns (None, end) when only whitespace is left.
    """
    n = len(text)
    while i < n and text[i] in WHITESPACE:
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
        elif c in WHITESPACE:
            while i < n and text[i] in WHITESPACE:
                i += 1
            break
        else:
            out += c.encode("utf-8", "surrogateescape")
            i += 1
    if quote:
        raise SyntaxProblem(f"unbalanced {quote} quote")
    return out.decode("utf-8", "surrogateescape"), i


def expand_specifiers(word: str, problems: list[str]) -> str:
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
    if path == ";":
        # A bare ';' separates commands in ExecStart=, so systemd never reads it as a path.
        return f"the executable {path!r} is systemd's command separator"
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
            first, p = extract_word(value, p)
        except SyntaxProblem as exc:
            commands.append(ExecCommand((), unsupported=(f"{exc} in {value!r}",)))
            return commands
        if first is None:
            return commands
        if first == ";":
            continue
        prefix, path = _split_prefix(first)
        path = expand_specifiers(path, problems)
        if (problem := _executable_problem(path)) is not None:
            problems.append(problem)
        argv = [path]
        while p < n:
            if value[p] == ";" and value[p + 1 : p + 2] in ("", *WHITESPACE):
                p += 1
                while p < n and value[p] in WHITESPACE:
                    p += 1
                break
            if value.startswith("\\;", p) and value[p + 2 : p + 3] in ("", *WHITESPACE):
                argv.append(";")
                p += 2
                while p < n and value[p] in WHITESPACE:
                    p += 1
                continue
            try:
                word, p = extract_word(value, p)
            except SyntaxProblem as exc:
                problems.append(f"{exc} in {value!r}")
                p = n
                break
            if word is None:
                break
            argv.append(expand_specifiers(word, problems))
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


def escape(text: str, *, dollar: bool, what: str) -> str:
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
    escaped = escape(word, dollar=dollar, what=word)
    needs_quotes = not word or word[0] in "#;" or any(c.isspace() or c in "'\"" for c in word)
    return f'"{escaped}"' if needs_quotes else escaped


def render_words(argv: Sequence[str], prefix: str) -> list[str]:
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
    return " ".join(render_words(argv, prefix))
