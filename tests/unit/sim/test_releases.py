"""The simulated SGLang speaks the release it is given: flags, `--help`, warnings, lines."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from console.service.catalogue import catalogue
from console.sim import releases
from console.sim.sglang import ArgumentError, SimSGLang, help_text, parse_command
from console.watch.sglang import DecodeBatch, parse_line

BASE = ["/opt/sglang/venv/bin/python3", "-m", "sglang.launch_server", "--model-path", "/m"]


def test_help_lists_the_releases_own_cuda_graph_arguments() -> None:
    assert "--cuda-graph-backend-decode" in help_text("0.5.23")
    assert "--cuda-graph-max-bs " not in help_text("0.5.23")
    assert "--cuda-graph-backend-decode" not in help_text("0.5.10")
    assert "--disable-cuda-graph" in help_text("0.5.10")


def test_0_5_23_refuses_cuda_graph_max_bs_as_ambiguous_like_the_real_argparse() -> None:
    release = catalogue().release("0.5.23")
    with pytest.raises(ArgumentError, match="ambiguous option: --cuda-graph-max-bs could match"):
        parse_command([*BASE, "--cuda-graph-max-bs", "8"], {}, release)
    cfg = parse_command([*BASE, "--cuda-graph-backend-decode", "disabled"], {}, release)
    assert not cfg.cuda_graph


def test_a_deprecated_argument_prints_the_releases_warning() -> None:
    (warning,) = releases.deprecation_warnings(
        [*BASE, "--disable-cuda-graph"], catalogue().release("0.5.23")
    )
    assert "'--disable-cuda-graph' is deprecated and will be removed in a future release." in (
        warning
    )
    assert releases.deprecation_warnings([*BASE, "--disable-cuda-graph"], None) == []


@pytest.mark.parametrize(
    "version", ["0.3.6", "0.4.6", "0.4.10", "0.5.3", "0.5.4", "0.5.5", "0.5.10", "0.5.23"]
)
def test_decode_lines_are_in_the_releases_format_and_parse(version: str) -> None:
    release = catalogue().release(version)
    line = releases.decode_line(
        release,
        running=8,
        tokens=9000,
        usage=0.05,
        accept_len=4.25,
        accept_rate=0.4,
        graph=True,
        throughput=1500.0,
        queue=1,
        iteration=320,
    )
    parsed = parse_line(f"[2026-01-02 03:04:05 TP0] {line}")
    assert isinstance(parsed, DecodeBatch), line
    assert (parsed.running_req, parsed.gen_throughput, parsed.queue_req) == (8, 1500.0, 1)
    key = release.key if release else (0, 0, 0)
    assert parsed.accept_len == (4.25 if key >= (0, 4, 6) else None)
    assert parsed.accept_rate == (0.4 if key >= (0, 5, 4) else None)
    assert parsed.iteration == (320 if key == (0, 5, 4) else None)
    assert parsed.graph == (True if key >= (0, 4, 10) else None)


def test_demo_versions_are_releases() -> None:
    assert all(releases.is_release(v) for v in releases.DEMO_RELEASES)
    assert not releases.is_release("banana")


def test_before_0_5_3_health_answers_while_the_model_loads() -> None:
    old = SimSGLang(BASE, {}, lambda message, priority: None, version="0.4.10")
    assert old.handle_http("GET", "/health", b"")[0] == 200
    assert old.handle_http("GET", "/health_generate", b"")[0] == 503
    new = SimSGLang(BASE, {}, lambda message, priority: None, version="0.5.23")
    assert new.handle_http("GET", "/health", b"")[0] == 503


def test_the_simulated_server_needs_only_the_standard_library() -> None:
    """The testbed runs it with the hosts' plain `/usr/bin/python3`, which has no pydantic."""
    code = (
        "import sys\n"
        "for name in ('pydantic', 'asyncssh', 'textual', 'rich'):\n"
        "    sys.modules[name] = None\n"
        "import console.sim.sglang_process\n"
        "from console.sim.sglang import help_text\n"
        "assert '--cuda-graph-backend-decode' in help_text('0.5.23')\n"
    )
    root = Path(__file__).parents[3]
    env = {**os.environ, "PYTHONPATH": str(root)}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stderr
