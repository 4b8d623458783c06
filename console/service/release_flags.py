"""A profile's flags as the host's SGLang release takes them.

`console.service.catalogue` says what an argument is on a release; this module rewrites a
profile's `FlagSpec` for it (`--disable-cuda-graph` → `--cuda-graph-backend-decode disabled`
from 0.5.16) and refuses, before anything touches the host, an argument the release removed.
Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from console.hosts.profiles import FlagSpec
from console.service.catalogue import ArgStatus, Release, catalogue, replacement_form
from console.service.execline import FlagError

__all__ = ["ReleaseSpecs", "adapt_spec", "release_specs"]


def adapt_spec(spec: FlagSpec, status: ArgStatus) -> FlagSpec | None:
    """`spec` rewritten for a deprecated argument's replacement; None when it stays as it is.

    A `--disable-cuda-graph` switch becomes `--cuda-graph-backend-decode disabled` (the same
    switch, written `ARG VALUE`); a valued `--cuda-graph-max-bs` becomes
    `--cuda-graph-max-bs-decode`. A replacement this cannot express is left alone (the
    deprecated argument still works on that release).
    """
    if status.status != "deprecated" or not status.replacement or spec.arg is None:
        return None
    form = replacement_form(status.replacement)
    if form is None:
        return None
    arg, value = form
    if spec.type == "switch":
        if value is None:
            return spec.model_copy(update={"arg": arg})
        return spec.model_copy(update={"arg": arg, "value": value})
    if value is not None:
        return None
    return spec.model_copy(update={"arg": arg})


@dataclass(frozen=True)
class ReleaseSpecs:
    """A profile's flags as the host's release takes them."""

    specs: Mapping[str, FlagSpec]
    moved: Mapping[str, str] = field(default_factory=dict)
    """Flag name → the deprecated argument it was written with, now replaced."""
    notes: tuple[str, ...] = ()
    """One sentence per argument the release deprecated (`specops set` prints them)."""


def release_specs(
    specs: Mapping[str, FlagSpec], names: Iterable[str], release: Release | None
) -> ReleaseSpecs:
    """`specs` with the flags `names` mapped to `release`'s arguments.

    Raises FlagError (before anything touches the host) for an argument the release removed
    or that its argparse would find ambiguous, naming the replacement.
    """
    if release is None:
        return ReleaseSpecs(dict(specs))
    book = catalogue()
    out = dict(specs)
    moved: dict[str, str] = {}
    notes: list[str] = []
    for name in names:
        spec = specs[name]
        if spec.arg is None:
            continue
        status = book.status(spec.arg, release)
        if status.refused:
            raise FlagError(
                f"{status.describe()}: change 'arg' of flags.{name} in the profile", flag=name
            )
        if status.status != "deprecated":
            continue
        adapted = adapt_spec(spec, status)
        if adapted is None:
            notes.append(f"{name}: {status.describe()} (kept: no automatic translation)")
            continue
        out[name] = adapted
        moved[name] = spec.arg
        written = adapted.arg if adapted.value is None else f"{adapted.arg} {adapted.value}"
        notes.append(f"{name}: {status.describe()}; writing {written}")
    return ReleaseSpecs(out, moved, tuple(notes))
