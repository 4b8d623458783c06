"""Host file names in the package: the one place that keeps, renames or refuses each name.

A bench directory on a real host can hold any name POSIX allows: a backslash, a newline or
CR, bytes that are not UTF-8, 255 bytes (so `NAME.part` would not fit), or `NAME.part`
itself (specops' own temporary suffix, which no manifest lists and which would collide with
the download of `NAME`). Each such file is kept under a name that works everywhere, or
refused by name with the reason; it never costs its siblings their place in the package.
`shown` is how every message names a host file, so a hostile name cannot draw on the
terminal and two different names never read alike.
"""

from __future__ import annotations

import unicodedata

from console.package.manifest import PART_SUFFIX

NAME_MAX = 255
"""Bytes in one file name (Linux's NAME_MAX): what a package name plus `.part` must fit in."""
RENAMED_PART = "_part"
"""What a host file's own `.part` suffix becomes in the package."""


class RefusedName(ValueError):
    """A host file that cannot go into the package under any faithful name."""


def shown(name: str) -> str:
    """`name` for a message: backslashes, control characters and non-UTF-8 bytes escaped."""
    out = []
    for char in name:
        if "\udc80" <= char <= "\udcff":  # a byte that was not UTF-8 (surrogateescape)
            out.append(f"\\x{ord(char) - 0xDC00:02x}")
        elif char == "\\":
            out.append("\\\\")
        elif unicodedata.category(char) in ("Cc", "Cf", "Zl", "Zp"):
            out.append(ascii(char)[1:-1])
        else:
            out.append(char)
    return "".join(out)


def package_name(name: str) -> str:
    """The name a host file gets in the package, or `RefusedName` saying why it gets none."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        raise RefusedName("its name is not UTF-8") from None
    if any(c in name for c in "\n\r"):
        raise RefusedName("its name holds a line break")
    if any(unicodedata.category(c) == "Cc" for c in name):
        raise RefusedName("its name holds a control character")
    if name.endswith(PART_SUFFIX):
        name = name.removesuffix(PART_SUFFIX) + RENAMED_PART
    size = len((name + PART_SUFFIX).encode())
    if size > NAME_MAX:
        raise RefusedName(f"its name is too long: {size} bytes with {PART_SUFFIX}, over {NAME_MAX}")
    return name
