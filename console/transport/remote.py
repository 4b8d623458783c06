"""The fixed vocabulary of remote commands.

Every command specops ever sends to a host is built here, from an argv, with `shlex.join`.
`HostSession.run` and `HostSession.stream` only accept a `Command`, so no other module can
put a hand-formatted shell string on the wire. Inputs that end up in an argv are validated
first (unit names, paths, cursors) so that nothing surprising reaches a host even quoted.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from console.hosts.profiles import UNIT_RE

SHOW_PROPERTIES = (
    "ActiveState",
    "SubState",
    "Result",
    "InvocationID",
    "NRestarts",
    "MainPID",
    "NeedDaemonReload",
    "FragmentPath",
    "DropInPaths",
    "ExecMainStatus",
    "ExecMainCode",
)

# The fields a follower reads (console/watch/journal.py `_Fields`); journalctl always adds
# __CURSOR, the timestamps and _BOOT_ID. Each one the entry has costs journalctl time: its
# JSON is what limits a flat-out read from a real host (bench/journald.py), and
# SYSLOG_IDENTIFIER, asked for and never read, cost 4 % of it and 30 bytes a line.
FOLLOW_FIELDS = (
    "MESSAGE",
    "PRIORITY",
    "_SYSTEMD_INVOCATION_ID",
    "_PID",
    "MESSAGE_ID",
    "N_DROPPED",
    "__SEQNUM",
    "__SEQNUM_ID",
)


class UnsafeArgument(ValueError):
    """A value that must never be sent to a host (NUL, newline, bad unit name, …)."""


@dataclass(frozen=True)
class Command:
    """One remote command: an argv, whether it needs root, and optional stdin."""

    argv: tuple[str, ...]
    privileged: bool = False
    stdin: str | None = None
    audited: bool = True
    """False: not written to the audit log (a read run every few seconds, like the GPUs')."""

    def shell(self, sudo: bool) -> str:
        """The exact string sent over SSH (the remote login shell parses it)."""
        argv = ("sudo", "-n", "--", *self.argv) if self.privileged and sudo else self.argv
        return shlex.join(argv)


def _clean(value: str, what: str) -> str:
    if "\x00" in value or "\n" in value or "\r" in value:
        raise UnsafeArgument(f"{what} {value!r} contains a NUL or line break")
    return value


def _unit(unit: str) -> str:
    if not UNIT_RE.match(unit):
        raise UnsafeArgument(f"unit {unit!r} is not a service name")
    return unit


def _abs_path(path: str) -> str:
    _clean(path, "path")
    if not path.startswith("/"):
        raise UnsafeArgument(f"path {path!r} must be absolute")
    return path


def _cursor(cursor: str) -> str:
    if not re.fullmatch(r"[A-Za-z0-9=;_.:-]+", cursor):
        raise UnsafeArgument(f"journal cursor {cursor!r} has unexpected characters")
    return cursor


# --- systemd ---------------------------------------------------------------------------


def systemctl_show(unit: str, properties: Sequence[str] = SHOW_PROPERTIES) -> Command:
    props = [f"--property={p}" for p in properties]
    return Command(("systemctl", "show", *props, "--", _unit(unit)))


def systemctl_cat(unit: str) -> Command:
    return Command(("systemctl", "cat", "--", _unit(unit)))


def systemctl_is_active(unit: str) -> Command:
    return Command(("systemctl", "is-active", "--", _unit(unit)))


def systemctl_daemon_reload() -> Command:
    return Command(("systemctl", "daemon-reload"), privileged=True)


def systemctl_restart(unit: str) -> Command:
    return Command(("systemctl", "restart", "--", _unit(unit)), privileged=True)


def systemctl_reset_failed(unit: str) -> Command:
    return Command(("systemctl", "reset-failed", "--", _unit(unit)), privileged=True)


def parse_show(text: str) -> dict[str, str]:
    """`systemctl show` prints KEY=VALUE lines; values may themselves contain '='."""
    props: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            props[key] = value
    return props


# --- journal ---------------------------------------------------------------------------


def journal_last(unit: str) -> Command:
    """The newest entry of the unit (its cursor is the follower's baseline)."""
    return Command(("journalctl", "-u", _unit(unit), "-o", "json", "-q", "-n", "1", "--no-pager"))


UNIT_STARTED = "39f53479d3a045ac8e11786248231fbf"
"""systemd's MESSAGE_ID for "A start job for unit … has finished successfully" (`Started …`)."""
UNIT_RESTART_SCHEDULED = "5eb03494b6584870a536b337290809b3"
"""systemd's MESSAGE_ID for "Automatic restarting of a unit has been scheduled"."""


def unit_starts(unit: str, since_s: int) -> Command:
    """systemd's own records of the unit's starts and automatic restarts within the last
    `since_s` seconds: a handful of entries, however much the service logged meanwhile."""
    argv = ["journalctl", "-u", _unit(unit), "-o", "json", "-q", "-a", "--no-pager"]
    argv += [f"--since={int(since_s)} seconds ago", "--output-fields=MESSAGE_ID,INVOCATION_ID"]
    argv += [f"MESSAGE_ID={UNIT_STARTED}", f"MESSAGE_ID={UNIT_RESTART_SCHEDULED}"]
    return Command(tuple(argv))


def kernel_log(after_cursor: str | None, since_s: int, *, audited: bool = False) -> Command:
    """The kernel's lines (`--dmesg`: this boot) after `after_cursor`, else those of the last
    `since_s` seconds: where the NVIDIA driver logs its Xid errors. Filtered here, not with
    `--grep` (a journalctl built without PCRE2 refuses it)."""
    argv = ["journalctl", "--dmesg", "-o", "json", "-q", "-a", "--no-pager"]
    argv.append("--output-fields=MESSAGE")
    if after_cursor is not None:
        argv.append(f"--after-cursor={_cursor(after_cursor)}")
    else:
        argv.append(f"--since={int(since_s)} seconds ago")
    return Command(tuple(argv), audited=audited)


def journal_follow(unit: str, after_cursor: str | None) -> Command:
    """Follow the unit from just after `after_cursor` (from the start if None).

    `-f` alone implies `-b` (this boot only): resuming after the host rebooted would silently
    skip the old boot's last lines (and, with journalctl before 255, the new boot's first).
    `--merge` lifts that implied filter; the testbed's reboot fault proves it.
    """
    argv = ["journalctl", "-u", _unit(unit), "-o", "json", "-q", "-a", "--no-pager", "--no-tail"]
    argv.append("--merge")
    if after_cursor is not None:
        argv.append(f"--after-cursor={_cursor(after_cursor)}")
    argv += [f"--output-fields={','.join(FOLLOW_FIELDS)}", "-f"]
    return Command(tuple(argv))


def journal_read(
    unit: str,
    *,
    lines: int | None = None,
    since: str | None = None,
    after_cursor: str | None = None,
    invocation: str | None = None,
    fields: Sequence[str] | None = None,
) -> Command:
    """A one-shot read (no follow): history for `tail -n`, excerpts for snapshots.

    `fields` limits the JSON to those fields (journalctl always adds the cursor and times).
    """
    argv = ["journalctl", "-u", _unit(unit), "-o", "json", "-q", "-a", "--no-pager"]
    if fields is not None:
        for name in fields:
            if not re.fullmatch(r"[A-Z0-9_]+", name):
                raise UnsafeArgument(f"journal field {name!r} is not a field name")
        argv.append(f"--output-fields={','.join(fields)}")
    if since is not None:
        argv.append(f"--since={_clean(since, 'since')}")
    if after_cursor is not None:
        argv.append(f"--after-cursor={_cursor(after_cursor)}")
    if lines is not None:
        argv.append(f"--lines={int(lines)}")
    if invocation is not None:
        if not re.fullmatch(r"[0-9a-f]{32}", invocation):
            raise UnsafeArgument(f"invocation id {invocation!r} is not 32 hex digits")
        argv.append(f"_SYSTEMD_INVOCATION_ID={invocation}")
    return Command(tuple(argv))


# --- files -----------------------------------------------------------------------------


def sha256sum(paths: Sequence[str]) -> Command:
    return Command(("sha256sum", "--", *(_abs_path(p) for p in paths)))


def openssl_sha256(paths: Sequence[str]) -> Command:
    """`openssl dgst -sha256 -r`: `HASH *NAME` lines with the names as given, unescaped.

    Where OpenSSL uses the CPU's SHA instructions it hashes several times faster than
    coreutils' sha256sum. Paths are absolute, so none reads as an option (OpenSSL 1.0 knows
    no `--`), and none holds a line break (`_clean`), so every line is one file.
    """
    return Command(("openssl", "dgst", "-sha256", "-r", *(_abs_path(p) for p in paths)))


def read_file(path: str) -> Command:
    return Command(("cat", "--", _abs_path(path)), privileged=True)


READ_IF_EXISTS = 'test ! -e "$1" || exec cat -- "$1"'
"""One of the two shell scripts specops sends: `cat`, but exit 0 with no output for a missing
file (the host's history before specops first wrote it), so an absent file is no failed
command."""


WRITABLE = (
    'd=$1; while [ ! -e "$d" ]; do d=$(dirname -- "$d"); done; '
    'if [ -d "$d" ] && [ -w "$d" ]; then exit 0; fi; printf \'%s\\n\' "$d"; exit 1'
)
"""The third script: whether a directory can be written, or made (its nearest existing
ancestor can be written); on failure it prints the directory that refuses. `test -w` is
access(2): a read-only file system refuses even root."""


def writable(path: str) -> Command:
    """`sh -c WRITABLE sh PATH`, as root when the profile uses sudo (as the writes will)."""
    return Command(("sh", "-c", WRITABLE, "sh", _abs_path(path)), privileged=True)


CLAIM = 'mkdir -- "$1" 2>/dev/null && exit 0; if [ -d "$1" ]; then exit 3; fi; mkdir -- "$1"'
"""The fourth script: make a directory that must not exist yet (mkdir(2) is atomic: of two
consoles only one makes it): exit 0 made, 3 there already, else mkdir's own error."""

CLAIMED_ALREADY = 3


def claim(path: str) -> Command:
    """`sh -c CLAIM sh PATH`: take a claim only one console can hold."""
    return Command(("sh", "-c", CLAIM, "sh", _abs_path(path)), privileged=True)


def read_if_exists(path: str) -> Command:
    """`sh -c READ_IF_EXISTS sh PATH`: the path travels as `$1`, never inside the script."""
    return Command(("sh", "-c", READ_IF_EXISTS, "sh", _abs_path(path)), privileged=True)


READ_JSON_FILES = (
    'test -d "$1" || exit 0; cd -- "$1" || exit 1; for f in *.json; do test -f "$f" || continue; '
    "printf '%s\\n' \"$f\"; tr -d '\\n' < \"$f\" || exit 1; echo; done"
)
"""The other script: every `*.json` file of a directory as two lines, its name and its text
with the line breaks taken out (exit 0 with no output when the directory does not exist)."""


def read_json_files(directory: str) -> Command:
    """`sh -c READ_JSON_FILES sh DIR`: the directory travels as `$1`, never inside the script."""
    return Command(("sh", "-c", READ_JSON_FILES, "sh", _abs_path(directory)), privileged=True)


def make_dirs(path: str) -> Command:
    return Command(("mkdir", "-p", "--", _abs_path(path)), privileged=True)


def create_private(path: str) -> Command:
    """`install -m 600 /dev/null PATH`: an empty file only its owner may read, which `tee`
    then fills keeping that mode (a drop-in holds the secret flags' values; the state files
    hold what the operator tried). Never world-readable, not even for a moment."""
    return Command(("install", "-m", "600", "/dev/null", _abs_path(path)), privileged=True)


def write_file(path: str, content: str) -> Command:
    """Write `content` (sent on stdin) to `path`; `tee` so that it works through `sudo -n`."""
    return Command(("tee", "--", _abs_path(path)), privileged=True, stdin=content)


def move(source: str, target: str) -> Command:
    """rename(2) within one directory: the target is replaced in one step."""
    return Command(("mv", "-f", "--", _abs_path(source), _abs_path(target)), privileged=True)


def remove(path: str) -> Command:
    return Command(("rm", "-f", "--", _abs_path(path)), privileged=True)


# --- the server build ------------------------------------------------------------------


def _interpreter(interpreter: str) -> str:
    _clean(interpreter, "interpreter")
    if not re.fullmatch(r"/[^\s]*|[A-Za-z0-9._+-]+", interpreter) or interpreter.startswith("-"):
        raise UnsafeArgument(f"interpreter {interpreter!r} is not a path or a program name")
    return interpreter


def launch_server_help(interpreter: str) -> Command:
    """`PYTHON -m sglang.launch_server --help`: the arguments the installed build knows."""
    return Command((_interpreter(interpreter), "-m", "sglang.launch_server", "--help"))


SGLANG_VERSION_CODE = "import sglang; print(sglang.__version__)"


def sglang_version(interpreter: str) -> Command:
    """`PYTHON -c 'import sglang; print(sglang.__version__)'`: the release the unit runs."""
    return Command((_interpreter(interpreter), "-c", SGLANG_VERSION_CODE))


def gpu_names() -> Command:
    """`nvidia-smi --query-gpu=name --format=csv,noheader`: one GPU's name a line."""
    return Command(("nvidia-smi", "--query-gpu=name", "--format=csv,noheader"))


def gpu_query(
    program: Sequence[str], arguments: Sequence[str], *, audited: bool = False
) -> Command:
    """The profile's GPU program (`nvidia-smi`, or `docker exec C nvidia-smi`) with the
    query's arguments after it: one argv. Not audited as a poll; audited as a rollout's read."""
    if not program or program[0].startswith("-"):
        raise UnsafeArgument(f"GPU program {list(program)!r} does not start with a program")
    argv = tuple(_clean(a, "GPU program argument") for a in (*program, *arguments))
    return Command(argv, audited=audited)


# --- the operator's own benchmark command ----------------------------------------------


def bench_command(argv: Sequence[str]) -> Command:
    """The operator's `--bench CMD` as they wrote it (split with shlex, sent joined with
    shlex: one argv, never a script), run as the login user, not root."""
    if not argv:
        raise UnsafeArgument("the bench command is empty")
    return Command(tuple(_clean(a, "bench argument") for a in argv))
