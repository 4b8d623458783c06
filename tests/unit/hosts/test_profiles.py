"""Profile validation: errors name the file, the field and the value."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from console.cli import main
from console.hosts.profiles import ProfileError, load_fleet, load_profile

REPO = Path(__file__).resolve().parents[3]

MINIMAL = """
name = "gpu1"
[ssh]
host = "10.0.0.5"
[service]
unit = "sglang.service"
"""


def write(tmp_path: Path, text: str, name: str = "gpu1.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_shipped_profiles_describe_the_real_setup() -> None:
    fleet = {p.name: p for p in load_fleet(REPO / "profiles")}
    assert set(fleet) == {"b300", "pro6000"}
    for profile in fleet.values():
        assert profile.service.unit == "sglang-k26-ddtree.service"
        assert profile.service.port == 30001
        assert set(profile.flags) == {
            "budget",
            "topk",
            "cuda_graph",
            "nvls",
            "max_running",
            "window",
        }
        assert "accept len" in profile.journal.patterns
        assert "cuda graph: (True|False)" in profile.journal.patterns
        assert profile.artifacts.bench == ("/root/bench_results_opt/*.json",)
        assert profile.artifacts.package == "~/k26-ddtree-repro"
    cuda_graph = fleet["b300"].flags["cuda_graph"]
    assert cuda_graph.arg == "--disable-cuda-graph" and cuda_graph.inverted


def test_minimal_profile_gets_defaults(tmp_path: Path) -> None:
    profile = load_profile(write(tmp_path, MINIMAL))
    assert profile.ssh_port == 22
    assert profile.service.smoke.prompt == "2+2="
    assert profile.service.ready_timeout_s == 900


def test_unknown_key_names_file_field_and_value(tmp_path: Path) -> None:
    path = write(tmp_path, MINIMAL.replace("[service]\n", "[service]\nprot = 30001\n"))
    with pytest.raises(ProfileError) as err:
        load_profile(path)
    text = str(err.value)
    assert str(path) in text and "service.prot" in text and "30001" in text


def test_port_out_of_range_exits_2_naming_file_field_value(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(tmp_path, MINIMAL.replace('host = "10.0.0.5"', 'host = "10.0.0.5"\nport = 70000'))
    code = main(["status", "--profiles", str(tmp_path)])
    assert code == 2
    err = capsys.readouterr().err
    assert "gpu1.toml" in err and "ssh.port" in err and "70000" in err


@pytest.mark.parametrize(
    ("snippet", "field", "value"),
    [
        ('[flags.budget]\narg = "--x"\nenv = "X"\ntype = "int"\n', "flags.budget", "--x"),
        ('[flags.budget]\narg = "--x"\ntype = "integer"\n', "flags.budget.type", "integer"),
        ('[flags.mode]\narg = "--mode"\ntype = "choice"\n', "flags.mode", "choice"),
        ('[journal]\npatterns = ["(unclosed"]\n', "journal.patterns", "(unclosed"),
        ('[[metrics]]\nname = "al"\nregex = "al=([0-9.]+)"\n', "metrics.0.regex", "al="),
    ],
)
def test_bad_values_are_named(tmp_path: Path, snippet: str, field: str, value: str) -> None:
    path = write(tmp_path, MINIMAL + snippet)
    with pytest.raises(ProfileError) as err:
        load_profile(path)
    text = str(err.value)
    assert str(path) in text and field in text and value in text


def test_a_ready_timeout_past_a_day_is_refused_by_name(tmp_path: Path) -> None:
    text = MINIMAL + "ready_timeout_s = 1e308\n"  # [service] is the last table
    with pytest.raises(ProfileError, match=r"service\.ready_timeout_s.*1e\+308"):
        load_profile(write(tmp_path, text))


@pytest.mark.parametrize("bad", ["var/lib/specops", "/var/lib/../../etc", "/var/lib/spec ops", "/"])
def test_a_state_directory_that_is_no_absolute_plain_path_is_refused_by_name(
    tmp_path: Path, bad: str
) -> None:
    path = write(tmp_path, MINIMAL + f'state_dir = "{bad}"\n')  # [service] is the last table
    with pytest.raises(ProfileError, match=r"service\.state_dir"):
        load_profile(path)


@pytest.mark.parametrize(
    ("field", "value"),
    [("host", "<10.1.2.3>"), ("host", "gpu;reboot"), ("user", "ops$(id)"), ("proxy_jump", "a,b")],
)
def test_an_address_with_characters_no_address_holds_is_refused_by_name(
    tmp_path: Path, field: str, value: str
) -> None:
    """Issue 41: `<10.1.2.3>` (a template typo) was taken for a host name to resolve."""
    text = MINIMAL.replace('host = "10.0.0.5"', f'host = "10.0.0.5"\n{field} = "{value}"')
    if field == "host":
        text = MINIMAL.replace('"10.0.0.5"', f'"{value}"')
    with pytest.raises(ProfileError, match=rf"ssh\.{field}.*must not contain"):
        load_profile(write(tmp_path, text))


def test_bad_unit_name(tmp_path: Path) -> None:
    with pytest.raises(ProfileError, match=r"service\.unit.*rm -rf"):
        load_profile(write(tmp_path, MINIMAL.replace("sglang.service", "x; rm -rf /")))


def test_invalid_toml_names_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, "name = \n")
    with pytest.raises(ProfileError, match="not valid TOML"):
        load_profile(path)


def test_duplicate_names_in_a_fleet(tmp_path: Path) -> None:
    write(tmp_path, MINIMAL, "a.toml")
    write(tmp_path, MINIMAL, "b.toml")
    with pytest.raises(ProfileError, match="already used"):
        load_fleet(tmp_path)


def test_empty_directory_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ProfileError, match=r"no \*\.toml"):
        load_fleet(tmp_path)


def test_the_tui_refuses_to_start_without_a_terminal(tmp_path: Path) -> None:
    """Run from a script or cron, the TUI must fail at once (it would spin on EOF)."""
    import subprocess
    import sys

    result = subprocess.run(
        [sys.executable, "-m", "console", "demo"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=30,
        cwd=tmp_path,
    )
    assert result.returncode == 2
    assert "needs a terminal" in result.stderr


def test_shipped_journal_patterns_show_every_draft_runner_wording() -> None:
    """`Initialized DDTREE` alone missed the public branches' `Initialized DDTree worker.`."""
    lines = [
        "[2026-01-02 03:04:00 TP0] Initialized DDTree worker. block_size=16, tree_budget=64",
        "[2026-01-02 03:04:00 TP0] Initialized DDTREE v2 worker. block_size=8",
        "[2026-01-02 03:04:00 TP0] Initialized DFLASH draft runner. attention_backend=fa3",
        "[2026-01-02 03:04:00 TP0] Initialized DSpark draft runner. gamma=7",
    ]
    for profile in load_fleet(REPO / "profiles"):
        patterns = [re.compile(p) for p in profile.journal.patterns]
        for line in lines:
            assert any(p.search(line) for p in patterns), (profile.name, line)


def test_an_int_flag_without_min_is_a_count_and_refuses_values_below_1() -> None:
    from console.hosts.profiles import FlagSpec
    from console.service.execline import FlagError
    from console.service.flags import validate_value

    count = FlagSpec(arg="--speculative-num-draft-tokens", type="int")
    assert count.min == 1
    for text in ("0", "-1"):
        with pytest.raises(FlagError, match="must be at least 1"):
            validate_value("budget", count, text)
    assert validate_value("budget", count, "16") == 16
    offset = FlagSpec(arg="--some-offset", type="int", min=-1)  # the profile says otherwise
    assert validate_value("offset", offset, "-1") == -1


def test_probation_defaults_and_bad_values_are_named(tmp_path: Path) -> None:
    service = load_profile(write(tmp_path, MINIMAL)).service
    assert (service.probation_s, service.auto_rollback, service.rollback_countdown_s) == (
        1800,
        True,
        10,
    )
    for line, field, value in [
        ("probation_s = -5", "service.probation_s", "-5"),
        ('auto_rollback = "no"', "service.auto_rollback", "no"),
        ("rollback_countdown_s = 9000", "service.rollback_countdown_s", "9000"),
    ]:
        path = write(tmp_path, MINIMAL.replace("[service]\n", f"[service]\n{line}\n"))
        with pytest.raises(ProfileError) as err:
            load_profile(path)
        text = str(err.value)
        assert str(path) in text and field in text and value in text, text


def test_the_gpu_section_names_a_program_and_refuses_shell_text_by_name(tmp_path: Path) -> None:
    gpu = load_profile(write(tmp_path, MINIMAL)).gpu
    assert (gpu.command, gpu.interval_s, gpu.enabled) == (("nvidia-smi",), 10.0, True)
    inside = '[gpu]\ncommand = ["docker", "exec", "sglang", "nvidia-smi"]\ninterval_s = 30\n'
    gpu = load_profile(write(tmp_path, MINIMAL + inside)).gpu
    assert gpu.command == ("docker", "exec", "sglang", "nvidia-smi") and gpu.interval_s == 30
    for snippet, field, value in [
        ('command = ["nvidia-smi; reboot"]', "gpu.command", "nvidia-smi; reboot"),
        ('command = ["--query-gpu=name"]', "gpu.command", "--query-gpu=name"),
        ("command = []", "gpu.command", "must name a program"),
        ("interval_s = 0.1", "gpu.interval_s", "0.1"),
        ('enabled = "no"', "gpu.enabled", "no"),
    ]:
        path = write(tmp_path, MINIMAL + f"[gpu]\n{snippet}\n")
        with pytest.raises(ProfileError) as err:
            load_profile(path)
        text = str(err.value)
        assert str(path) in text and field in text and value in text, text
