"""SGLang's launch flags per release, and what a profile's argument means on a given release.

Flags move between releases: `--disable-cuda-graph` is deprecated from 0.5.16 in favour of
`--cuda-graph-backend-decode disabled`; `--cuda-graph-max-bs` is a deprecated alias in 0.5.16
and gone in 0.5.23, where argparse's prefix matching answers "ambiguous option". A profile is
written once for a fleet that runs several releases, so a friendly flag is mapped to the
argument the host's release takes (`adapt_spec`), and an argument the release removed is
refused before anything touches the host, naming its replacement (`ArgStatus`).

The data, `sglang_catalogue.json`, is built from the released wheels' own argparse parsers by
`tools/sglang_catalogue.py` (see the README). Pure: no I/O beyond reading the package file.
Standard library only: the simulated server (a plain `python3` on the testbed hosts) uses it.
How a profile's flag is rewritten for a release is in `console.service.release_flags`.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

__all__ = [
    "ArgStatus",
    "Catalogue",
    "Option",
    "Release",
    "catalogue",
    "deprecated_in",
    "release_key",
    "successor",
]

_DATA = Path(__file__).with_name("sglang_catalogue.json")
_VERSION_RE = re.compile(r"(\d+)\.(\d+)(?:\.(\d+))?")


def release_key(version: str) -> tuple[int, int, int] | None:
    """`"0.5.23"` → (0, 5, 23); `"0.5.9-ddtree"` → (0, 5, 9); None when it is no version."""
    match = _VERSION_RE.match(version.strip().lstrip("v"))
    if match is None:
        return None
    major, minor, patch = match.groups()
    return int(major), int(minor), int(patch or 0)


@dataclass(frozen=True, slots=True)
class Option:
    """One `--option` spelling of one release."""

    dest: str
    switch: bool = False
    """Takes no value (`store_true`)."""
    choices: tuple[str, ...] | None = None
    deprecated: str | None = None
    """The replacement SGLang names (`--cuda-graph-max-bs-decode`), "" when it names none,
    None when the option is not deprecated."""


Status = Literal["known", "deprecated", "removed", "ambiguous", "unknown"]


@dataclass(frozen=True, slots=True)
class ArgStatus:
    """What an argument is on one release."""

    arg: str
    release: str
    status: Status
    replacement: str | None = None
    """What to write instead (deprecated or removed arguments), when SGLang named it."""
    since: str | None = None
    """The release that deprecated it (removed arguments: the last release that had it)."""
    candidates: tuple[str, ...] = ()
    """For `ambiguous`: the options argparse's prefix matching would choose between."""

    @property
    def refused(self) -> bool:
        """The server would not start with it."""
        return self.status in ("removed", "ambiguous")

    def describe(self) -> str:
        """One sentence for people: what the release does with the argument and what to use."""
        instead = f"; use {self.replacement}" if self.replacement else ""
        if self.status == "deprecated":
            return f"{self.arg} is deprecated (SGLang {self.since or self.release} on){instead}"
        if self.status == "ambiguous":
            return (
                f"{self.arg} is gone in SGLang {self.release} (last in {self.since}){instead}: "
                f"argparse answers 'ambiguous option: {self.arg} could match "
                f"{', '.join(self.candidates)}'"
            )
        if self.status == "removed":
            return f"{self.arg} is gone in SGLang {self.release} (last in {self.since}){instead}"
        if self.status == "unknown":
            return f"SGLang {self.release} has no {self.arg}"
        return f"{self.arg} is a flag of SGLang {self.release}"


@dataclass(frozen=True)
class Release:
    """The launch flags of one SGLang release."""

    name: str
    options: Mapping[str, Option] = field(repr=False)
    allow_abbrev: bool = True

    @property
    def key(self) -> tuple[int, int, int]:
        key = release_key(self.name)
        assert key is not None
        return key

    def prefix_matches(self, arg: str) -> tuple[str, ...]:
        """Options argparse would accept `arg` as an abbreviation of."""
        if not self.allow_abbrev:
            return ()
        return tuple(sorted(o for o in self.options if o.startswith(arg)))


class Catalogue:
    """Every catalogued release, oldest first."""

    def __init__(self, releases: list[Release]) -> None:
        self.releases = tuple(sorted(releases, key=lambda r: r.key))

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(r.name for r in self.releases)

    def release(self, name: str) -> Release | None:
        return next((r for r in self.releases if r.name == name), None)

    def release_for(self, version: str | None) -> Release | None:
        """The newest catalogued release not newer than `version` (a build of a branch is read
        as the release it branched from); None when unknown or older than every release."""
        key = None if version is None else release_key(version)
        if key is None:
            return None
        older = [r for r in self.releases if r.key <= key]
        return older[-1] if older else None

    def status(self, arg: str, release: Release) -> ArgStatus:
        """What `arg` is on `release`, with the replacement SGLang names for it."""
        option = release.options.get(arg)
        if option is not None:
            if option.deprecated is None:
                return ArgStatus(arg, release.name, "known")
            since = self._deprecated_since(arg, release)
            return ArgStatus(
                arg, release.name, "deprecated", option.deprecated or None, since=since
            )
        last = next(
            (r for r in reversed(self.releases) if r.key < release.key and arg in r.options),
            None,
        )
        if last is None:
            return ArgStatus(arg, release.name, "unknown")
        replacement = last.options[arg].deprecated or None
        candidates = release.prefix_matches(arg)
        if len(candidates) == 1:
            # argparse expands the prefix: the server starts, with the one option it matches.
            return ArgStatus(arg, release.name, "deprecated", candidates[0], since=last.name)
        kind: Status = "ambiguous" if candidates else "removed"
        return ArgStatus(arg, release.name, kind, replacement, last.name, candidates)

    def _deprecated_since(self, arg: str, release: Release) -> str:
        since = release.name
        for older in reversed(self.releases):
            if older.key > release.key:
                continue
            option = older.options.get(arg)
            if option is None or option.deprecated is None:
                break
            since = older.name
        return since


@functools.lru_cache(maxsize=1)
def catalogue() -> Catalogue:
    """The catalogue shipped with the console (read once)."""
    data = json.loads(_DATA.read_text(encoding="utf-8"))
    releases = []
    for name, body in data["releases"].items():
        options = {
            arg: Option(
                dest=raw["dest"],
                switch=bool(raw.get("switch", False)),
                choices=tuple(raw["choices"]) if raw.get("choices") else None,
                deprecated=raw.get("deprecated"),
            )
            for arg, raw in body["options"].items()
        }
        releases.append(Release(name, options, bool(body.get("allow_abbrev", True))))
    return Catalogue(releases)


# --- adapting a profile's flag to a release -----------------------------------------------

_REPLACEMENT_RE = re.compile(r"(--[A-Za-z0-9-]+?)(?:-\{([\w,]+)\})?(?:=(\S+))?$")


def replacement_form(text: str) -> tuple[str, str | None] | None:
    """`--x-{decode,prefill}=disabled` → ("--x-decode", "disabled"); `--y` → ("--y", None)."""
    match = _REPLACEMENT_RE.match(text.strip())
    if match is None:
        return None
    stem, alternatives, value = match.groups()
    arg = stem if alternatives is None else f"{stem}-{alternatives.split(',')[0]}"
    return arg, value


@functools.lru_cache(maxsize=256)
def successor(arg: str) -> tuple[str, str | None] | None:
    """The (argument, value) a newer release writes instead of `arg`, if one deprecated it.

    `--disable-cuda-graph` → ("--cuda-graph-backend-decode", "disabled"). Reading a unit's
    flags checks both forms, whichever release wrote the command line.
    """
    for release in reversed(catalogue().releases):
        option = release.options.get(arg)
        if option is not None and option.deprecated:
            return replacement_form(option.deprecated)
    return None


def deprecated_in(argv: Sequence[str], release: Release | None) -> list[ArgStatus]:
    """The arguments of a command line that `release` deprecated or removed, in order."""
    if release is None:
        return []
    book = catalogue()
    found: list[ArgStatus] = []
    seen: set[str] = set()
    for word in argv[1:]:
        arg = word.split("=", 1)[0]
        if not arg.startswith("--") or arg in seen:
            continue
        seen.add(arg)
        status = book.status(arg, release)
        if status.status in ("deprecated", "removed", "ambiguous"):
            found.append(status)
    return found
