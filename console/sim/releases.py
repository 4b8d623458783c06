"""What changes in the simulated SGLang from one release to the next: flags, `--help`, lines.

The simulated server speaks one release at a time (`SimHost(sglang_version=...)`,
`specops demo --sglang-version X`). Its launch flags follow the shipped catalogue
(`console.service.catalogue`, built from the wheels): an argument the release removed is
refused the way that release's argparse refuses it, the 0.5.16 CUDA-graph arguments exist only
from 0.5.16, and a deprecated argument prints the release's start-up warning
(`sglang/srt/arg_groups/argparse_actions.py: print_deprecated_warning`). Its log lines follow
the release's format strings (`decode_line`; see `tests/fixtures/sglang/`).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from console.service.catalogue import Release, catalogue, release_key

DEFAULT_RELEASE = "0.5.9-ddtree"
"""The DDTree branch the simulator was first written against (it branched from 0.5.9)."""

DEMO_RELEASES = (DEFAULT_RELEASE, "0.5.23", "0.5.10")
"""The releases `specops demo` spreads its hosts over, in order."""

# The 0.5.16 split of the CUDA-graph arguments, as the simulated server takes them.
_GRAPH_ARGS = (
    ("--cuda-graph-backend-decode", {"choices": ("full", "breakable", "disabled")}),
    ("--cuda-graph-backend-prefill", {"choices": ("full", "breakable", "disabled")}),
    ("--cuda-graph-max-bs-decode", {"type": int}),
    ("--cuda-graph-max-bs-prefill", {"type": int}),
)


def release_of(version: str | None) -> Release | None:
    """The catalogued release a simulated `sglang.__version__` behaves as."""
    return catalogue().release_for(version or DEFAULT_RELEASE)


def is_release(version: str) -> bool:
    """A version `specops demo --sglang-version` accepts: one the catalogue can place."""
    return release_key(version) is not None and release_of(version) is not None


def keeps(arg: str, release: Release | None) -> bool:
    """Whether the simulated server of `release` still takes `arg` (removed ones are gone)."""
    return release is None or not catalogue().status(arg, release).refused


def add_release_arguments(parser: argparse.ArgumentParser, release: Release | None) -> None:
    """The arguments `release` added to the simulator's base set."""
    if release is None:
        return
    for arg, options in _GRAPH_ARGS:
        if arg in release.options:
            parser.add_argument(arg, default=None, **options)


def deprecation_warnings(argv: Sequence[str], release: Release | None) -> list[str]:
    """The warnings `release` prints at start-up for the deprecated arguments in `argv`."""
    if release is None:
        return []
    lines = []
    for word in argv:
        arg = word.split("=", 1)[0]
        option = release.options.get(arg) if arg.startswith("--") else None
        if option is None or option.deprecated is None:
            continue
        instead = f" Use '{option.deprecated}' instead." if option.deprecated else ""
        lines.append(
            f"\x1b[1;33m'{arg}' is deprecated and will be removed in a future release.{instead}"
            "\x1b[0m"
        )
    return lines


def decode_line(
    release: Release | None,
    *,
    running: int,
    tokens: int,
    usage: float,
    accept_len: float,
    accept_rate: float,
    graph: bool,
    throughput: float,
    queue: int,
    iteration: int,
) -> str:
    """A speculative `Decode batch` line as `release` formats it."""
    key = release.key if release is not None else (0, 5, 10)
    if key < (0, 5, 4):
        head = "Decode batch."
    elif key < (0, 5, 5):
        head = f"Decode batch [{iteration}],"  # 0.5.4 always printed the forward count
    else:
        head = "Decode batch,"
    spec = f"accept len: {accept_len:.2f}, "
    if key >= (0, 5, 4):
        spec += f"accept rate: {accept_rate:.2f}, "
    graph_field = f"cuda graph: {graph}, " if key >= (0, 4, 10) else ""
    if key < (0, 4, 6):
        spec = ""  # 0.3/0.4.1 print no acceptance at all
    tail = ", " if (0, 4, 10) <= key < (0, 5, 10) else ""
    return (
        f"{head} #running-req: {running}, #token: {tokens}, token usage: {usage:.2f}, "
        f"{spec}{graph_field}gen throughput (token/s): {throughput:.2f}, #queue-req: {queue}{tail}"
    )
