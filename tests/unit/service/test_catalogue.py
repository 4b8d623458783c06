"""The flag catalogue built from the wheels: what an argument is on each release."""

from __future__ import annotations

import pytest

from console.hosts.profiles import FlagSpec
from console.service.catalogue import Release, catalogue, deprecated_in, release_key, successor
from console.service.execline import FlagError
from console.service.flags import apply_flags, read_flags
from console.service.release_flags import adapt_spec, release_specs

CUDA_GRAPH = FlagSpec(arg="--disable-cuda-graph", type="switch", inverted=True)
MAX_BS = FlagSpec(arg="--cuda-graph-max-bs", type="int", min=1, max=4096)


def test_every_release_from_0_3_6_to_0_5_23_is_catalogued() -> None:
    names = catalogue().names
    assert names[0] == "0.3.6" and names[-1] == "0.5.23"
    assert {"0.4.10", "0.5.3", "0.5.10", "0.5.16"} <= set(names)


@pytest.mark.parametrize(
    ("version", "release"),
    [("0.5.23", "0.5.23"), ("0.5.9-ddtree", "0.5.6"), ("v0.5.17rc1", "0.5.16"), ("0.3.0", None)],
)
def test_a_build_is_read_as_the_newest_release_not_newer_than_it(
    version: str, release: str | None
) -> None:
    found = catalogue().release_for(version)
    assert (found.name if found else None) == release


def test_release_key_reads_what_sglang_version_prints() -> None:
    assert release_key("0.5.23") == (0, 5, 23)
    assert release_key("0.5.9-ddtree") == (0, 5, 9)
    assert release_key("not a version") is None


@pytest.mark.parametrize(
    ("release", "arg", "status", "replacement"),
    [
        ("0.5.10", "--disable-cuda-graph", "known", None),
        (
            "0.5.16",
            "--disable-cuda-graph",
            "deprecated",
            "--cuda-graph-backend-{decode,prefill}=disabled",
        ),
        (
            "0.5.23",
            "--disable-cuda-graph",
            "deprecated",
            "--cuda-graph-backend-{decode,prefill}=disabled",
        ),
        ("0.5.16", "--cuda-graph-max-bs", "deprecated", "--cuda-graph-max-bs-decode"),
        ("0.5.23", "--cuda-graph-max-bs", "ambiguous", "--cuda-graph-max-bs-decode"),
        ("0.5.23", "--cuda-graph-bs", "ambiguous", "--cuda-graph-bs-decode"),
        ("0.5.10", "--speculative-draft-window-size", "unknown", None),
        ("0.5.16", "--speculative-draft-window-size", "known", None),
    ],
)
def test_argument_status_per_release(
    release: str, arg: str, status: str, replacement: str | None
) -> None:
    book = catalogue()
    rel = book.release(release)
    assert rel is not None
    found = book.status(arg, rel)
    assert (found.status, found.replacement) == (status, replacement)


def test_ambiguous_names_the_options_argparse_would_choose_between() -> None:
    book = catalogue()
    rel = book.release("0.5.23")
    assert rel is not None
    found = book.status("--cuda-graph-max-bs", rel)
    assert found.candidates == ("--cuda-graph-max-bs-decode", "--cuda-graph-max-bs-prefill")
    assert found.refused and found.since == "0.5.16"
    assert "ambiguous option: --cuda-graph-max-bs could match" in found.describe()


def test_cuda_graph_off_is_written_for_the_release() -> None:
    book = catalogue()
    argv = ["/venv/bin/python3", "-m", "sglang.launch_server", "--tp", "8"]
    old = release_specs({"cuda_graph": CUDA_GRAPH}, ["cuda_graph"], book.release("0.5.10"))
    assert apply_flags(old.specs, argv, {}, {"cuda_graph": False})[0][-1] == "--disable-cuda-graph"
    new = release_specs({"cuda_graph": CUDA_GRAPH}, ["cuda_graph"], book.release("0.5.23"))
    written = apply_flags(new.specs, argv, {}, {"cuda_graph": False})[0]
    assert written[-2:] == ["--cuda-graph-backend-decode", "disabled"]
    assert read_flags({"cuda_graph": CUDA_GRAPH}, written, {}) == {"cuda_graph": False}
    assert new.moved == {"cuda_graph": "--disable-cuda-graph"}
    assert "writing --cuda-graph-backend-decode disabled" in new.notes[0]


def test_turning_graphs_back_on_leaves_another_backend_alone() -> None:
    spec = adapt_spec(CUDA_GRAPH, catalogue().status("--disable-cuda-graph", _rel("0.5.23")))
    assert spec is not None and spec.value == "disabled"
    argv = ["python", "--cuda-graph-backend-decode", "breakable"]
    assert apply_flags({"g": spec}, argv, {}, {"g": True})[0] == argv
    off = ["python", "--cuda-graph-backend-decode=disabled"]
    assert apply_flags({"g": spec}, off, {}, {"g": True})[0] == ["python"]


def test_a_removed_argument_is_refused_naming_its_replacement() -> None:
    with pytest.raises(FlagError, match="use --cuda-graph-max-bs-decode") as info:
        release_specs({"max_bs": MAX_BS}, ["max_bs"], _rel("0.5.23"))
    assert "flags.max_bs" in str(info.value)
    mapped = release_specs({"max_bs": MAX_BS}, ["max_bs"], _rel("0.5.16"))
    assert mapped.specs["max_bs"].arg == "--cuda-graph-max-bs-decode"


def test_deprecated_arguments_of_a_unit_are_listed_with_their_replacement() -> None:
    argv = ["python", "--disable-cuda-graph", "--cuda-graph-max-bs=8", "--tp", "8"]
    found = deprecated_in(argv, _rel("0.5.23"))
    assert [(d.arg, d.status) for d in found] == [
        ("--disable-cuda-graph", "deprecated"),
        ("--cuda-graph-max-bs", "ambiguous"),
    ]
    assert deprecated_in(argv, _rel("0.5.10")) == []


def test_successor_is_the_newest_replacement() -> None:
    assert successor("--disable-cuda-graph") == ("--cuda-graph-backend-decode", "disabled")
    assert successor("--cuda-graph-max-bs") == ("--cuda-graph-max-bs-decode", None)
    assert successor("--tp-size") is None


def _rel(name: str) -> Release:
    release = catalogue().release(name)
    assert release is not None
    return release
