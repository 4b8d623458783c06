"""The ExecStart model: `systemctl cat` parsing, systemd quoting, drop-ins and flag values.

A wrong quote here starts the GPU server with a different command, so the rules are checked
three ways: hand-written cases from systemd's manuals and source, hypothesis round trips, and
— where `systemd-analyze` exists — the real systemd parser reading the text we render.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from console.hosts.profiles import FlagSpec, FlagValue, Profile, load_profile
from console.service.execline import (
    ExecCommand,
    FlagError,
    parse_command_line,
    parse_execstart,
    render_execstart,
)
from console.service.flags import (
    apply_flags,
    diff_argv,
    format_value,
    format_variant,
    read_flags,
    validate_value,
)
from console.service.unit import (
    ServiceExec,
    dropin_environment,
    dropin_for,
    dropin_path,
    effective_service,
    render_dropin,
)

PROFILE_PATH = Path(__file__).resolve().parents[3] / "profiles" / "b300.toml"
UNIT = "sglang-k26-ddtree.service"
MAIN = f"/etc/systemd/system/{UNIT}"
OVERRIDE = f"/etc/systemd/system/{UNIT}.d/override.conf"
PYTHON = "/opt/sglang/venv/bin/python3"

MAIN_TEXT = f"""\
[Unit]
Description=SGLang Kimi-K2.6 + DFlash/DDTree drafter (8x B300)
After=network-online.target
Wants=network-online.target

[Service]
Type=simple
WorkingDirectory=/opt/sglang
# /opt/sglang/venv/bin/python3 is the venv with the DDTree patch
Environment=PYTHONUNBUFFERED=1 "NCCL_DEBUG=WARN"
Environment=SGLANG_DDTREE_MAX_TOPK=2
Environment="HF_HOME=/models/hf cache"
ExecStart={PYTHON} -m sglang.launch_server \\
    --model-path /models/Kimi-K2.6 --tp 8 --port 30001
Restart=on-failure
RestartSec=5

[Install]
WantedBy=multi-user.target
"""

OVERRIDE_TEXT = f"""\
[Service]
# The main unit only starts the bare server; this is the DDTree command.
ExecStart=
ExecStart={PYTHON} -m sglang.launch_server \\
    --model-path /models/Kimi-K2.6 \\
    --tp 8 --port 30001 \\
; a comment inside a continuation is skipped, the command goes on
    --speculative-algorithm DFLASH \\
    --speculative-draft-model-path /models/k26-dflash \\
    --speculative-dflash-enable-ddtree \\
    --speculative-num-draft-tokens 8 \\
    --max-running-requests 16 \\
    --served-model-name "Kimi K2.6 (DDTree)"
Environment=SGLANG_DDTREE_MAX_TOPK=4
"""

EXPECTED_ARGV = [
    PYTHON,
    "-m",
    "sglang.launch_server",
    "--model-path",
    "/models/Kimi-K2.6",
    "--tp",
    "8",
    "--port",
    "30001",
    "--speculative-algorithm",
    "DFLASH",
    "--speculative-draft-model-path",
    "/models/k26-dflash",
    "--speculative-dflash-enable-ddtree",
    "--speculative-num-draft-tokens",
    "8",
    "--max-running-requests",
    "16",
    "--served-model-name",
    "Kimi K2.6 (DDTree)",
]


def systemctl_cat(files: Mapping[str, str]) -> str:
    """What `systemctl cat` prints: each file behind a `# path` header, a blank line between."""
    return "".join(
        f"{chr(10) if i else ''}# {path}\n{text}" for i, (path, text) in enumerate(files.items())
    )


CAT = systemctl_cat({MAIN: MAIN_TEXT, OVERRIDE: OVERRIDE_TEXT})


@pytest.fixture(scope="module")
def profile() -> Profile:
    return load_profile(PROFILE_PATH)


@pytest.fixture(scope="module")
def specs(profile: Profile) -> dict[str, FlagSpec]:
    return dict(profile.flags)


# --- systemctl cat ----------------------------------------------------------------------------


def test_effective_service_merges_unit_and_drop_in() -> None:
    service = effective_service(CAT)
    assert service.files == (MAIN, OVERRIDE)
    assert service.argv == EXPECTED_ARGV
    assert service.execstart_source == OVERRIDE
    assert service.command.prefix == ""
    assert service.command.rewritable
    assert service.environment == {
        "PYTHONUNBUFFERED": "1",
        "NCCL_DEBUG": "WARN",
        "SGLANG_DDTREE_MAX_TOPK": "4",
        "HF_HOME": "/models/hf cache",
    }
    assert service.environment_sources["SGLANG_DDTREE_MAX_TOPK"] == OVERRIDE
    assert service.environment_sources["HF_HOME"] == MAIN
    assert service.problems == ()


def test_execstart_without_reset_gives_two_commands_which_we_refuse() -> None:
    text = systemctl_cat(
        {MAIN: "[Service]\nExecStart=/bin/a\n", OVERRIDE: "[Service]\nExecStart=/bin/b x\n"}
    )
    service = effective_service(text)
    assert [c.argv for c in service.commands] == [("/bin/a",), ("/bin/b", "x")]
    with pytest.raises(FlagError, match="exactly one ExecStart= command, found 2"):
        _ = service.argv


def test_execstart_reset_without_new_command_leaves_none() -> None:
    service = effective_service(
        systemctl_cat({MAIN: "[Service]\nExecStart=/bin/a\n", OVERRIDE: "[Service]\nExecStart=\n"})
    )
    assert service.commands == ()
    assert service.execstart_source is None
    with pytest.raises(FlagError, match="found 0"):
        service.require_rewritable()


def test_environment_words_quotes_reset_and_override() -> None:
    main = '[Service]\nEnvironment=A=1 "B=two words" C=x\nEnvironment=A=3\n'
    override = (
        "[Service]\nEnvironment=\n"
        'Environment="D=quote\\"d" \'E=single quoted\' F=%%50 G=$HOME\n'
        "Environment=D=last\\x20wins\n"
    )
    service = effective_service(systemctl_cat({MAIN: main, OVERRIDE: override}))
    # The empty Environment= dropped A, B and C; `$` has no meaning in Environment=.
    assert service.environment == {
        "D": "last wins",
        "E": "single quoted",
        "F": "%50",
        "G": "$HOME",
    }
    assert set(service.environment_sources.values()) == {OVERRIDE}


def test_invalid_environment_words_are_ignored_like_systemd() -> None:
    text = '[Service]\nEnvironment=GOOD=1 NOEQUALS 1BAD=x "CTRL=a\\x01b" \'OPEN=x\n'
    service = effective_service(systemctl_cat({MAIN: text}))
    assert service.environment == {"GOOD": "1"}
    assert len(service.problems) == 4


def test_unset_environment_and_environment_files() -> None:
    main = "[Service]\nEnvironment=A=1 B=2 C=3\nEnvironmentFile=-/etc/default/sglang\n"
    override = "[Service]\nUnsetEnvironment=A B=nope C=3\n"
    service = effective_service(systemctl_cat({MAIN: main, OVERRIDE: override}))
    assert service.environment == {"B": "2"}
    assert service.unset_environment == ("A", "B=nope", "C=3")
    assert service.environment_files == ("-/etc/default/sglang",)


def test_continuations_comments_and_line_endings() -> None:
    text = (
        "[Service]\r\n"
        "ExecStart=/bin/echo a \\\r\n"
        "# comment lines inside a continuation are skipped\n"
        "   ; so are these\n"
        "  b \\\\\n"  # an escaped backslash: the line ends here
        "ExecStart=\n"
        "ExecStart=/bin/echo c \\\n"
        "  d\\\\\\\n"  # `\\` then a continuation
        "  e \\"  # a dangling continuation at end of file still counts
    )
    service = effective_service(systemctl_cat({MAIN: text}))
    assert service.argv == ["/bin/echo", "c", "d\\", "e"]


def test_only_the_service_section_counts() -> None:
    text = (
        "ExecStart=/bin/outside\n[Unit]\nExecStart=/bin/unit\n[Service]\nExecStart=/bin/yes\n"
        "[Install]\nExecStart=/bin/install\n"
    )
    assert effective_service(systemctl_cat({MAIN: text})).argv == ["/bin/yes"]


def test_a_comment_that_looks_like_a_header_is_not_one() -> None:
    text = "[Service]\n# /opt/sglang/venv/bin/python3\nExecStart=/bin/x\n"
    service = effective_service(systemctl_cat({MAIN: text}))
    assert service.files == (MAIN,)
    assert service.argv == ["/bin/x"]


def test_each_file_starts_outside_any_section() -> None:
    # A drop-in without its own [Service] header is ignored by systemd.
    text = systemctl_cat({MAIN: "[Service]\nExecStart=/bin/a\n", OVERRIDE: "ExecStart=/bin/b\n"})
    assert effective_service(text).argv == ["/bin/a"]


def test_drop_ins_from_several_directories_and_colour_codes() -> None:
    global_dropin = "/usr/lib/systemd/system/service.d/10-timeout-abort.conf"
    files = {
        MAIN: "[Service]\nExecStart=/bin/a\n",
        global_dropin: "[Service]\nTimeoutStopFailureMode=abort\n",
        OVERRIDE: "[Service]\nExecStart=\nExecStart=/bin/b\n",
    }
    text = systemctl_cat(files).replace(f"# {OVERRIDE}", f"\x1b[0;1;34m# {OVERRIDE}\x1b[0m")
    service = effective_service(text)
    assert service.files == (MAIN, global_dropin, OVERRIDE)
    assert service.argv == ["/bin/b"]


def test_sim_style_cat_output_without_trailing_newlines() -> None:
    text = f"# {MAIN}\n[Service]\nExecStart=/bin/a \\\n# {OVERRIDE}\n[Service]\nEnvironment=X=1"
    service = effective_service(text)
    assert service.argv == ["/bin/a"]
    assert service.environment == {"X": "1"}


# --- command lines ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "argv"),
    [
        ('/bin/e "two words" \'single "q"\'', ("/bin/e", "two words", 'single "q"')),
        ('/bin/e mid"dle quo"te', ("/bin/e", "middle quote")),
        (r"/bin/e a\sb \x41\102 \u00e9\U0001F600", ("/bin/e", "a b", "AB", "é😀")),
        (r"/bin/e '\n\t' \"\\", ("/bin/e", "\n\t", '"\\')),
        (r"/bin/e \xc3\xa9 \377", ("/bin/e", "é", "\udcff")),
        ("/bin/e $$HOME 100%% a$b $ {x} $${X}", ("/bin/e", "$HOME", "100%", "a$b", "$", "{x}")),
        ("/bin/e \"\" ''", ("/bin/e", "", "")),
        (r'/bin/e \; ";" x;', ("/bin/e", ";", ";", "x;")),
        ("  /bin/e \t a  ", ("/bin/e", "a")),
        ('"/opt/my dir/py" x', ("/opt/my dir/py", "x")),
        ("/opt/100%%/py", ("/opt/100%/py",)),
    ],
)
def test_command_line_parsing(line: str, argv: tuple[str, ...]) -> None:
    if "$ {x}" in line:  # a lone `$` word is dropped by systemd: we flag it instead
        command = parse_command_line(line)[0]
        assert command.argv[:5] == argv[:5]
        assert not command.rewritable
        return
    assert parse_execstart(line) == ExecCommand(argv)


@pytest.mark.parametrize(
    ("line", "prefix", "argv"),
    [
        ("-/bin/e x", "-", ("/bin/e", "x")),
        ("@/bin/e zero one", "@", ("/bin/e", "zero", "one")),
        ("-@:+/bin/e $$", "-@:+", ("/bin/e", "$$")),  # ':' turns off all `$` handling
        ("!!/bin/e", "!!", ("/bin/e",)),
        ('-"/opt/my dir/py"', "-", ("/opt/my dir/py",)),
    ],
)
def test_prefixes_are_kept_apart(line: str, prefix: str, argv: tuple[str, ...]) -> None:
    assert parse_execstart(line) == ExecCommand(argv, prefix)


def test_semicolon_separates_commands() -> None:
    commands = parse_command_line("/bin/a 1 ; /bin/b 2 ;")
    assert [c.argv for c in commands] == [("/bin/a", "1"), ("/bin/b", "2")]
    with pytest.raises(FlagError, match="exactly one command, found 2"):
        parse_execstart("/bin/a ; /bin/b")


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ("/bin/e $HOME", r"\$VARIABLE"),
        ("/bin/e --x=${FOO}", r"\$\{…\}"),
        ("/bin/e %i", "specifier '%i'"),
        ("/srv/%n/bin", "specifier '%n'"),
        ("/bin/e $", r"\$VARIABLE"),
        (r"/bin/e \q", "unknown escape"),
        (r"/bin/e \x00", "NUL"),
        (r"/bin/e \u0000", "not a valid character"),
        ('/bin/e "open', "unbalanced"),
        ("/bin/e trailing\\", "trailing backslash"),
        ("/bin/$$x", "contains '\\$'"),
        ("relative/bin", "neither an absolute path"),
        ("/bin/", "directory"),
        ("@/bin/e", "needs an argv"),
    ],
)
def test_unsupported_lines_are_flagged_not_rewritten(line: str, reason: str) -> None:
    command = parse_command_line(line)[0]
    assert not command.rewritable
    assert any(re.search(reason, problem) for problem in command.unsupported)
    service = ServiceExec(files=(MAIN,), commands=(command,), execstart_source=MAIN)
    with pytest.raises(FlagError, match="refusing to rewrite ExecStart="):
        service.require_rewritable()


def test_unsupported_words_are_kept_literally() -> None:
    command = parse_execstart("/bin/e $HOME ${A}b %i 50%%")
    assert command.argv == ("/bin/e", "$HOME", "${A}b", "%i", "50%")


# --- rendering --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (["/bin/e", "plain", "--x=1"], "/bin/e plain --x=1"),
        (["/bin/e", "two words", ""], '/bin/e "two words" ""'),
        (["/bin/e", "100%", "$HOME"], "/bin/e 100%% $$HOME"),
        (["/bin/e", 'say "hi"', "it's"], '/bin/e "say \\"hi\\"" "it\'s"'),
        (["/bin/e", "a\\b", "x\ny\tz\x01"], r'/bin/e a\\b "x\ny\tz\x01"'),
        (["/bin/e", ";", "#x", "é"], '/bin/e ";" "#x" é'),
        (["/bin/e", "\u00a0", "\u2028"], r'/bin/e "\xc2\xa0" "\xe2\x80\xa8"'),
        (["/opt/my dir/py"], '"/opt/my dir/py"'),
    ],
)
def test_render_execstart(argv: list[str], line: str) -> None:
    assert render_execstart(argv) == line
    assert list(parse_execstart(line).argv) == argv


def test_render_with_colon_prefix_keeps_dollars() -> None:
    assert render_execstart(["/bin/e", "$HOME"], prefix="-:") == "-:/bin/e $HOME"


@pytest.mark.parametrize(
    ("argv", "prefix", "match"),
    [
        ([], "", "at least the executable"),
        (["/bin/e", "a\x00b"], "", "NUL"),
        (["/bin/e", "\ud800"], "", "surrogate"),
        (["-bin"], "", "prefix character"),
        (["/bin/$x"], "", "contains '\\$'"),
        (['/bin/"q"'], "", "quotes"),
        (["bin/e"], "", "neither an absolute path"),
        (["/bin/e"], "@", "needs an argv"),
        (["/bin/e"], "x", "not a valid ExecStart= prefix"),
        (["/bin/e"], "--", "not a valid ExecStart= prefix"),
    ],
)
def test_render_refuses_what_systemd_cannot_express(
    argv: list[str], prefix: str, match: str
) -> None:
    with pytest.raises(FlagError, match=match):
        render_execstart(argv, prefix=prefix)


def test_raw_bytes_round_trip() -> None:
    argv = ["/bin/e", "caf\udce9", "\udcff\udcfe"]  # undecodable bytes, as surrogateescape
    assert parse_execstart(render_execstart(argv)).argv == tuple(argv)


ARG_TEXT = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=24)
EXECUTABLES = st.one_of(
    st.from_regex(r"/[A-Za-z0-9_.%é][A-Za-z0-9_./ %é-]{0,24}", fullmatch=True),
    st.from_regex(r"[A-Za-z0-9_][A-Za-z0-9_.%-]{0,12}", fullmatch=True),
).filter(lambda p: not p.endswith("/") and p not in (".", ".."))
PREFIXES = st.sampled_from(["", "-", ":", "+", "!", "!!", "-:", "@", "-@:+", ":!!"])


@given(EXECUTABLES, st.lists(ARG_TEXT, max_size=8), PREFIXES)
def test_render_then_parse_is_the_identity(exe: str, args: list[str], prefix: str) -> None:
    assume("@" not in prefix or args)
    argv = [exe, *args]
    command = parse_execstart(render_execstart(argv, prefix=prefix))
    assert command == ExecCommand(tuple(argv), prefix)


@given(st.lists(ARG_TEXT, min_size=1, max_size=6))
@example([";"])  # found by hypothesis now and then: a bare ';' is systemd's separator
def test_any_argv_either_round_trips_or_is_refused(argv: list[str]) -> None:
    try:
        line = render_execstart(argv)
    except FlagError as exc:
        assert "executable" in str(exc)
        return
    assert parse_execstart(line).argv == tuple(argv)


# --- the drop-in ------------------------------------------------------------------------------


def test_dropin_path() -> None:
    assert dropin_path(UNIT) == f"/etc/systemd/system/{UNIT}.d/zz-specops.conf"
    with pytest.raises(FlagError, match="not a systemd service name"):
        dropin_path("../evil.service")


def test_render_dropin_text() -> None:
    text = render_dropin(
        [PYTHON, "-m", "sglang.launch_server", "--tp", "8", "--enable-nccl-nvls", "--x", "a b"],
        {"SGLANG_DDTREE_MAX_TOPK": "8", "WEIRD": 'a "q" 100% $HOME \\'},
        unset=["OLD"],
    )
    assert text.splitlines()[0].startswith("# Managed by specops")
    assert text.endswith(
        "[Service]\n"
        "ExecStart=\n"
        f"ExecStart={PYTHON} \\\n"
        "    -m sglang.launch_server \\\n"
        "    --tp 8 \\\n"
        "    --enable-nccl-nvls \\\n"
        '    --x "a b"\n'
        'Environment="SGLANG_DDTREE_MAX_TOPK=8"\n'
        'Environment="WEIRD=a \\"q\\" 100%% $HOME \\\\"\n'
        "UnsetEnvironment=OLD\n"
    )


def test_render_dropin_refuses_bad_environment() -> None:
    with pytest.raises(FlagError, match="environment variable name"):
        render_dropin(["/bin/e"], {"1BAD": "x"})
    with pytest.raises(FlagError, match="control characters"):
        render_dropin(["/bin/e"], {"A": "x\x01"})
    with pytest.raises(FlagError, match="cannot both set and unset A"):
        render_dropin(["/bin/e"], {"A": "1"}, unset=["A"])


def test_dropin_is_read_back_by_our_parser() -> None:
    service = effective_service(CAT)
    argv, env = apply_flags_b300(service, {"budget": 16, "nvls": True, "topk": 8})
    text = render_dropin(argv, {"SGLANG_DDTREE_MAX_TOPK": env["SGLANG_DDTREE_MAX_TOPK"]})
    after = effective_service(
        systemctl_cat({MAIN: MAIN_TEXT, OVERRIDE: OVERRIDE_TEXT, dropin_path(UNIT): text})
    )
    assert after.argv == argv
    assert after.environment == env
    assert after.execstart_source == dropin_path(UNIT)


ENV_NAMES = st.from_regex(r"[A-Z_][A-Z0-9_]{0,8}", fullmatch=True)
ENV_VALUES = st.text(
    st.characters(exclude_categories=("Cc", "Cs")) | st.sampled_from("\n\t"), max_size=16
)


@given(
    st.lists(ARG_TEXT, max_size=10),
    st.dictionaries(ENV_NAMES, ENV_VALUES, max_size=4),
    st.lists(ENV_NAMES, max_size=2),
)
def test_any_dropin_round_trips(args: list[str], env: dict[str, str], unset: list[str]) -> None:
    unset = [name for name in unset if name not in env]
    text = render_dropin([PYTHON, *args], env, unset=unset)
    main = "[Service]\nExecStart=/bin/old\n" + "".join(
        f'Environment="{name}=main"\n' for name in unset
    )
    service = effective_service(systemctl_cat({MAIN: main, dropin_path(UNIT): text}))
    assert service.argv == [PYTHON, *args]
    assert service.environment == env
    assert service.problems == ()


# --- flag values ------------------------------------------------------------------------------


def apply_flags_b300(
    service: ServiceExec, changes: Mapping[str, FlagValue]
) -> tuple[list[str], dict[str, str]]:
    specs = load_profile(PROFILE_PATH).flags
    return apply_flags(specs, service.argv, service.environment, changes)


def test_read_flags_from_a_real_unit(specs: dict[str, FlagSpec]) -> None:
    service = effective_service(CAT)
    assert read_flags(specs, service.argv, service.environment) == {
        "budget": 8,
        "topk": 4,
        "cuda_graph": True,
        "nvls": False,
        "max_running": 16,
        "window": None,
    }


def test_read_flags_forms_and_last_occurrence(specs: dict[str, FlagSpec]) -> None:
    argv = [
        PYTHON,
        "--speculative-num-draft-tokens=4",
        "--max-running-requests",
        "8",
        "--speculative-num-draft-tokens",
        "12",
        "--disable-cuda-graph",
        "--enable-nccl-nvls",
    ]
    values = read_flags(specs, argv, {})
    assert values["budget"] == 12
    assert values["max_running"] == 8
    assert values["cuda_graph"] is False
    assert values["nvls"] is True
    assert values["topk"] is None


def test_read_flags_errors_name_the_flag(specs: dict[str, FlagSpec]) -> None:
    with pytest.raises(FlagError, match=r"flag 'budget'.*no value"):
        read_flags(specs, [PYTHON, "--speculative-num-draft-tokens"], {})
    with pytest.raises(FlagError, match="flag 'topk': value 'four': must be a whole number"):
        read_flags(specs, [PYTHON], {"SGLANG_DDTREE_MAX_TOPK": "four"})


def test_executable_is_never_taken_for_a_flag(specs: dict[str, FlagSpec]) -> None:
    assert read_flags(specs, ["--enable-nccl-nvls"], {})["nvls"] is False


@pytest.mark.parametrize(
    ("name", "text", "value"),
    [
        ("budget", "16", 16),
        ("budget", " 16 ", 16),
        ("budget", "+16", 16),
        ("budget", "unset", None),
        ("cuda_graph", "off", False),
        ("cuda_graph", "ON", True),
        ("cuda_graph", "true", True),
        ("cuda_graph", "0", False),
        ("nvls", "yes", True),
        ("nvls", "no", False),
    ],
)
def test_validate_value(specs: dict[str, FlagSpec], name: str, text: str, value: object) -> None:
    assert validate_value(name, specs[name], text) == value


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("budget", "2000", "flag 'budget': value '2000': must be between 1 and 1024"),
        ("budget", "0", "flag 'budget': value '0': must be between 1 and 1024"),
        ("budget", "8.5", "flag 'budget': value '8.5': must be a whole number"),
        ("budget", "", "must not be empty"),
        ("budget", "1\n6", "flag 'budget': value '1\\n6': must not contain NUL, newlines"),
        ("budget", "16\x00", "must not contain NUL"),
        ("cuda_graph", "maybe", "flag 'cuda_graph': value 'maybe': a switch is on/off"),
        ("cuda_graph", "unset", "a switch is on/off"),
    ],
)
def test_validate_value_errors(
    specs: dict[str, FlagSpec], name: str, text: str, message: str
) -> None:
    with pytest.raises(FlagError) as info:
        validate_value(name, specs[name], text)
    assert message in str(info.value)
    assert info.value.flag == name


def test_validate_float_choice_and_str() -> None:
    ratio = FlagSpec(arg="--mem-fraction-static", type="float", min=0.1, max=0.95)
    assert validate_value("mem", ratio, "0.85") == 0.85
    assert validate_value("mem", ratio, ".5") == 0.5
    for bad, rule in (("nan", "must be a number"), ("0.99", "between 0.1 and 0.95")):
        with pytest.raises(FlagError, match=rule):
            validate_value("mem", ratio, bad)
    backend = FlagSpec(arg="--attention-backend", type="choice", choices=("fa3", "flashinfer"))
    assert validate_value("attn", backend, "fa3") == "fa3"
    with pytest.raises(FlagError, match="must be one of: fa3, flashinfer"):
        validate_value("attn", backend, "FA3")
    name = FlagSpec(arg="--served-model-name", type="str")
    assert validate_value("served", name, "Kimi K2.6") == "Kimi K2.6"


def test_apply_replaces_in_place_and_keeps_form(specs: dict[str, FlagSpec]) -> None:
    argv = [PYTHON, "--speculative-num-draft-tokens=8", "--tp", "8", "--max-running-requests", "4"]
    new_argv, _ = apply_flags(specs, argv, {}, {"budget": 16, "max_running": 32})
    assert new_argv == [
        PYTHON,
        "--speculative-num-draft-tokens=16",
        "--tp",
        "8",
        "--max-running-requests",
        "32",
    ]


def test_apply_adds_removes_and_toggles(specs: dict[str, FlagSpec]) -> None:
    service = effective_service(CAT)
    changes: dict[str, FlagValue] = {
        "window": 4096,
        "max_running": None,
        "cuda_graph": False,
        "nvls": True,
        "topk": None,
    }
    argv, env = apply_flags(specs, service.argv, service.environment, changes)
    assert argv[:16] == EXPECTED_ARGV[:16]
    assert argv[16:] == [
        "--served-model-name",
        "Kimi K2.6 (DDTree)",
        "--speculative-draft-window-size",
        "4096",
        "--disable-cuda-graph",
        "--enable-nccl-nvls",
    ]
    assert "SGLANG_DDTREE_MAX_TOPK" not in env
    assert env["PYTHONUNBUFFERED"] == "1"
    back, _ = apply_flags(specs, argv, env, {"cuda_graph": True, "nvls": False, "topk": 2})
    assert "--disable-cuda-graph" not in back
    assert "--enable-nccl-nvls" not in back
    assert read_flags(specs, back, _)["topk"] == 2


def test_apply_is_a_no_op_for_values_already_set(specs: dict[str, FlagSpec]) -> None:
    service = effective_service(CAT)
    current = read_flags(specs, service.argv, service.environment)
    argv, env = apply_flags(specs, service.argv, service.environment, current)
    assert (argv, env) == (service.argv, dict(service.environment))


def test_apply_writes_dash_values_with_equals() -> None:
    specs = {"name": FlagSpec(arg="--served-model-name", type="str")}
    argv, _ = apply_flags(specs, ["/bin/e"], {}, {"name": "-odd"})
    assert argv == ["/bin/e", "--served-model-name=-odd"]
    argv, _ = apply_flags(specs, [*argv[:1], "--served-model-name", "x"], {}, {"name": "-odd"})
    assert argv == ["/bin/e", "--served-model-name=-odd"]


@pytest.mark.parametrize(
    ("changes", "match"),
    [
        ({"nope": 1}, "flag 'nope': value 1: no such flag in the profile"),
        ({"budget": 0}, "flag 'budget': value '0': must be between 1 and 1024"),
        ({"budget": "8"}, "needs a int"),
        ({"budget": True}, "does not take on/off"),
        ({"cuda_graph": None}, "a switch takes True or False"),
        ({"budget": 8.0}, "needs a int"),
    ],
)
def test_apply_refuses_bad_changes(
    specs: dict[str, FlagSpec], changes: dict[str, FlagValue], match: str
) -> None:
    with pytest.raises(FlagError, match=match):
        apply_flags(specs, EXPECTED_ARGV, {}, changes)


B300_CHANGES = st.fixed_dictionaries(
    {},
    optional={
        "budget": st.none() | st.integers(1, 1024),
        "topk": st.none() | st.integers(1, 64),
        "cuda_graph": st.booleans(),
        "nvls": st.booleans(),
        "max_running": st.none() | st.integers(1, 4096),
        "window": st.none() | st.integers(1, 1048576),
    },
)


@given(st.lists(B300_CHANGES, min_size=1, max_size=4))
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_apply_then_read_gives_the_changes(
    specs: dict[str, FlagSpec], steps: list[dict[str, FlagValue]]
) -> None:
    service = effective_service(CAT)
    argv, env = service.argv, dict(service.environment)
    expected = read_flags(specs, argv, env)
    for changes in steps:
        argv, env = apply_flags(specs, argv, env, changes)
        expected.update(changes)
    assert read_flags(specs, argv, env) == expected
    assert argv[:9] == EXPECTED_ARGV[:9]  # the untouched arguments stay where they were
    assert parse_execstart(render_execstart(argv)).argv == tuple(argv)


def test_dropin_environment_unsets_only_what_the_unit_sets(specs: dict[str, FlagSpec]) -> None:
    service = effective_service(CAT)
    assert dropin_environment(specs, {}, service) == ({}, ("SGLANG_DDTREE_MAX_TOPK",))
    bare = effective_service(systemctl_cat({MAIN: "[Service]\nExecStart=/bin/e\n"}))
    assert dropin_environment(specs, {}, bare) == ({}, ())
    kept = dropin_environment(specs, {"SGLANG_DDTREE_MAX_TOPK": "8", "OTHER": "1"}, bare)
    assert kept == ({"SGLANG_DDTREE_MAX_TOPK": "8"}, ())


def test_full_cycle_through_drop_ins(specs: dict[str, FlagSpec]) -> None:
    """Read → change → drop-in → read again, twice, as successive rollouts would."""
    files = {MAIN: MAIN_TEXT, OVERRIDE: OVERRIDE_TEXT}
    for changes in ({"budget": 16, "topk": None, "nvls": True}, {"cuda_graph": False}):
        current = effective_service(systemctl_cat(files))
        before = read_flags(specs, current.argv, current.environment)
        argv, env = apply_flags(specs, current.argv, current.environment, changes)
        files[dropin_path(UNIT)] = dropin_for(specs, current, argv, env)
        after = effective_service(systemctl_cat(files))
        assert read_flags(specs, after.argv, after.environment) == {**before, **changes}
        assert after.argv == argv
    # The topk unset in the first round survives the rewrite in the second.
    assert "UnsetEnvironment=SGLANG_DDTREE_MAX_TOPK" in files[dropin_path(UNIT)]


def test_dropin_for_refuses_unsupported_lines(specs: dict[str, FlagSpec]) -> None:
    current = effective_service(systemctl_cat({MAIN: "[Service]\nExecStart=/bin/e $OPTS\n"}))
    with pytest.raises(FlagError, match=r"refusing to rewrite ExecStart=.*\$VARIABLE"):
        dropin_for(specs, current, current.argv, current.environment)
    literal = effective_service(
        systemctl_cat(
            {MAIN: "[Service]\nExecStart=/bin/e\nEnvironment=SGLANG_DDTREE_MAX_TOPK=%i\n"}
        )
    )
    assert "SGLANG_DDTREE_MAX_TOPK" in literal.literal_environment
    with pytest.raises(FlagError, match="specifier"):
        dropin_for(specs, literal, literal.argv, literal.environment)


def test_dropin_for_keeps_the_prefix(specs: dict[str, FlagSpec]) -> None:
    current = effective_service(systemctl_cat({MAIN: "[Service]\nExecStart=-/bin/e x\n"}))
    text = dropin_for(specs, current, ["/bin/e", "y"], {})
    assert "ExecStart=-/bin/e \\\n    y\n" in text or "ExecStart=-/bin/e y\n" in text
    again = effective_service(systemctl_cat({MAIN: "", dropin_path(UNIT): text}))
    assert again.command == ExecCommand(("/bin/e", "y"), "-")


# --- showing a change -------------------------------------------------------------------------


def test_diff_argv_shows_one_option_per_line(specs: dict[str, FlagSpec]) -> None:
    service = effective_service(CAT)
    argv, env = apply_flags(specs, service.argv, service.environment, {"budget": 16, "topk": 8})
    diff = diff_argv(service.argv, argv, old_env=service.environment, new_env=env)
    assert diff.startswith("--- current\n+++ proposed\n")
    changed = [line for line in diff.splitlines() if line[:1] in "+-" and line[:3] not in "---+++"]
    assert changed == [
        "-    --speculative-num-draft-tokens 8",
        "+    --speculative-num-draft-tokens 16",
        '-Environment="SGLANG_DDTREE_MAX_TOPK=4"',
        '+Environment="SGLANG_DDTREE_MAX_TOPK=8"',
    ]
    assert '     --served-model-name "Kimi K2.6 (DDTree)"' in diff.splitlines()
    assert diff_argv(argv, argv, old_env=env, new_env=env) == ""


def test_format_value() -> None:
    assert [format_value(v) for v in (None, True, False, 8, 0.5, "x")] == [
        "unset",
        "on",
        "off",
        "8",
        "0.5",
        "x",
    ]


# --- variant names ----------------------------------------------------------------------------


def test_format_variant_from_the_profile(profile: Profile, specs: dict[str, FlagSpec]) -> None:
    values = read_flags(specs, *apply_flags_b300(effective_service(CAT), {"nvls": True}))
    assert format_variant(profile.artifacts.variant, values) == "nvlsb8t4"
    values["nvls"] = False
    assert format_variant(profile.artifacts.variant, values) == "b8t4"
    values["topk"] = None
    assert format_variant(profile.artifacts.variant, values) == "b8tx"


@pytest.mark.parametrize(
    ("template", "values", "name"),
    [
        ("{budget:03d}-{ratio}", {"budget": 8, "ratio": 0.5}, "008-0.5"),
        ("{model}", {"model": "/models/Kimi K2.6"}, "_models_Kimi_K2.6"),
        ("{model}", {"model": "../x"}, "___x"),
        ("b{{{b}}}", {"b": 1}, "b_1_"),
        ("{g}é", {"g": True}, "g_"),
    ],
)
def test_format_variant_formats_and_sanitizes(
    template: str, values: dict[str, FlagValue], name: str
) -> None:
    assert format_variant(template, values) == name


@pytest.mark.parametrize(
    ("template", "match"),
    [
        ("{nope}", "flag 'nope': unknown field in variant template"),
        ("{}", "flag '': unknown field"),
        ("{budget.real}", "flag 'budget.real': unknown field"),
        ("{budget!r}", "conversion"),
        ("{budget:q}", "bad format"),
        ("{budget", "bad variant template"),
    ],
)
def test_format_variant_errors(template: str, match: str) -> None:
    with pytest.raises(FlagError, match=match):
        format_variant(template, {"budget": 8})


# --- against the real systemd parser ----------------------------------------------------------

SYSTEMD_ANALYZE = shutil.which("systemd-analyze")
needs_systemd = pytest.mark.skipif(SYSTEMD_ANALYZE is None, reason="needs systemd-analyze")


def _unquote_dump(raw: bytes) -> list[str]:
    """Undo systemd's quote_command_line(): `"…"` with C escapes, words split on one space."""
    escapes = {b"a": 7, b"b": 8, b"f": 12, b"n": 10, b"r": 13, b"t": 9, b"v": 11}
    words: list[str] = []
    i = 0
    while i < len(raw):
        word = bytearray()
        if raw[i : i + 1] == b'"':
            i += 1
            while raw[i : i + 1] != b'"':
                if raw[i : i + 1] == b"\\":
                    nxt = raw[i + 1 : i + 2]
                    if re.fullmatch(rb"[0-7]{3}", raw[i + 1 : i + 4]):
                        word.append(int(raw[i + 1 : i + 4], 8))
                        i += 4
                        continue
                    word += bytes([escapes[nxt]]) if nxt in escapes else nxt
                    i += 2
                else:
                    word += raw[i : i + 1]
                    i += 1
            i += 1
        else:
            end = raw.find(b" ", i)
            end = len(raw) if end < 0 else end
            word += raw[i:end]
            i = end
        words.append(word.decode("utf-8", "surrogateescape"))
        i += 1  # the separating space
    return words


def systemd_view(
    root: Path, units: Mapping[str, Mapping[str, str]]
) -> dict[str, tuple[list[str], dict[str, str]]]:
    """(argv as systemd loaded it, Environment=) per unit; files: '' is the unit, others drop-ins.

    `systemd-analyze verify` at debug level dumps each unit it loaded, including the parsed
    command line (before `$` expansion, which happens at exec time) and the environment.
    """
    paths = []
    for unit, files in units.items():
        for name, text in files.items():
            path = root / unit if not name else root / f"{unit}.d" / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8", errors="surrogateescape")
        paths.append(str(root / unit))
    assert SYSTEMD_ANALYZE is not None
    out = subprocess.run(
        [SYSTEMD_ANALYZE, "verify", "--man=no", *paths],
        capture_output=True,
        env={**os.environ, "SYSTEMD_LOG_LEVEL": "debug", "SYSTEMD_LOG_COLOR": "0"},
        timeout=60,
        check=False,
    ).stdout
    if b"-> Unit " not in out:
        pytest.skip("systemd-analyze could not load units here")
    view: dict[str, tuple[list[str], dict[str, str]]] = {}
    unit = ""
    for line in out.split(b"\n"):
        if m := re.fullmatch(rb"\t-> Unit (\S+):", line):
            unit = m.group(1).decode()
            view.setdefault(unit, ([], {}))
        elif line.startswith(b"\t\t\tCommand Line: ") and unit in units and not view[unit][0]:
            view[unit][0].extend(_unquote_dump(line.removeprefix(b"\t\t\tCommand Line: ")))
        elif line.startswith(b"\t\tEnvironment: ") and unit in units:
            name, _, value = line.removeprefix(b"\t\tEnvironment: ").decode().partition("=")
            view[unit][1][name] = value
    return {unit: view[unit] for unit in units}


def _as_systemd_dumps(command: ExecCommand) -> list[str]:
    """The dump shows argv before `$` expansion (exec time) and without the `@` path."""
    if ":" in command.prefix:
        return list(command.argv[1:] if "@" in command.prefix else command.argv)
    dollars = [w.replace("$", "$$") for w in command.argv[1:]]
    return dollars if "@" in command.prefix else [command.argv[0], *dollars]


@needs_systemd
def test_systemd_reads_the_realistic_unit_as_we_do(tmp_path: Path) -> None:
    view = systemd_view(tmp_path, {UNIT: {"": MAIN_TEXT, "override.conf": OVERRIDE_TEXT}})
    ours = effective_service(CAT)
    assert view[UNIT] == (ours.argv, dict(ours.environment))


TRICKY = [
    ["/bin/echo", "", " ", "a b", "tab\there", "new\nline", "\r", "\x01\x1f\x7f"],
    ["/bin/echo", '"', "'", "\\", "\\\\", '\\"', 'it\'s "q"', "\\;", ";", ";x", "#x"],
    ["/bin/echo", "%", "%%", "%i", "100%", "$", "$$", "$HOME", "${HOME}", "a$b", "$${x}"],
    ["/bin/echo", "é", "😀", "\u00a0", "\u2028", "\u0085", "\ufeff", "\U0001fffe", "\udcff"],
    ["/opt/100% dir/python3", "--served-model-name", "Kimi K2.6 (DDTree)"],
]


@needs_systemd
def test_systemd_parses_what_we_render(tmp_path: Path) -> None:
    units = {}
    expected = {}
    for i, argv in enumerate(TRICKY):
        for j, prefix in enumerate(("", ":", "@")):
            unit = f"t{i}x{j}.service"
            units[unit] = {"": f"[Service]\nExecStart={render_execstart(argv, prefix)}\n"}
            expected[unit] = _as_systemd_dumps(ExecCommand(tuple(argv), prefix))
    view = systemd_view(tmp_path, units)
    assert {unit: argv for unit, (argv, _) in view.items()} == expected


@needs_systemd
def test_systemd_reads_our_dropin(tmp_path: Path) -> None:
    argv = [*EXPECTED_ARGV, "--weird", "a\\b 100% $HOME \"q\" 'q' ;", "#hash", ";"]
    env = {"SGLANG_DDTREE_MAX_TOPK": "8", "W": "a\\b 100% $HOME \"q\" 'q' \t end"}
    text = render_dropin(argv, env, unset=["HF_HOME"])
    units = {UNIT: {"": MAIN_TEXT, "override.conf": OVERRIDE_TEXT, "zz-specops.conf": text}}
    systemd_argv, systemd_env = systemd_view(tmp_path, units)[UNIT]
    assert systemd_argv == _as_systemd_dumps(ExecCommand(tuple(argv)))
    # systemd-analyze dumps the Environment= list; UnsetEnvironment= applies at exec time.
    assert systemd_env == {
        "PYTHONUNBUFFERED": "1",
        "NCCL_DEBUG": "WARN",
        "HF_HOME": "/models/hf cache",
        **env,
    }
    ours = effective_service(
        systemctl_cat({MAIN: MAIN_TEXT, OVERRIDE: OVERRIDE_TEXT, dropin_path(UNIT): text})
    )
    assert ours.argv == argv
    assert ours.environment == {k: v for k, v in systemd_env.items() if k != "HF_HOME"}


@needs_systemd
@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.lists(ARG_TEXT, max_size=6), PREFIXES), min_size=1, max_size=8))
def test_systemd_agrees_on_random_command_lines(cases: list[tuple[list[str], str]]) -> None:
    units = {}
    expected = {}
    for i, (args, prefix) in enumerate(cases):
        command = ExecCommand(("/bin/echo", *args), prefix if args else prefix.replace("@", ""))
        unit = f"r{i}.service"
        line = render_execstart(command.argv, command.prefix)
        units[unit] = {"": f"[Service]\nExecStart={line}\n"}
        expected[unit] = _as_systemd_dumps(command)
        assert parse_execstart(line) == command
    with tempfile.TemporaryDirectory() as root:
        view = systemd_view(Path(root), units)
    assert {unit: argv for unit, (argv, _) in view.items()} == expected


def test_a_rewrite_keeps_the_variables_of_our_drop_in_it_does_not_manage(
    specs: dict[str, FlagSpec],
) -> None:
    """An older profile's variable (or a hand edit) in zz-specops.conf survives a rewrite."""
    ours = (
        "[Service]\nExecStart=\nExecStart=/bin/e --x 1\n"
        'Environment="SGLANG_DDTREE_MAX_TOPK=4" "NCCL_DEBUG=INFO"\n'
    )
    files = {MAIN: "[Service]\nExecStart=/bin/e\n", dropin_path(UNIT): ours}
    current = effective_service(systemctl_cat(files))
    argv, env = apply_flags(specs, current.argv, current.environment, {"topk": 8})
    files[dropin_path(UNIT)] = dropin_for(specs, current, argv, env)
    after = effective_service(systemctl_cat(files))
    assert after.environment == {"SGLANG_DDTREE_MAX_TOPK": "8", "NCCL_DEBUG": "INFO"}


def test_a_number_too_long_to_be_one_is_refused_by_name_not_by_a_traceback() -> None:
    spec = FlagSpec(arg="--speculative-num-draft-tokens", type="int")
    with pytest.raises(FlagError, match=r"flag 'budget': value '9{30}…': a number of at most 30"):
        validate_value("budget", spec, "9" * 5000)


def test_a_bound_on_one_side_is_said_as_such() -> None:
    with pytest.raises(FlagError, match=r"must be at least 1$"):
        validate_value("window", FlagSpec(arg="--w", type="int"), "0")
    with pytest.raises(FlagError, match=r"must be at most 0\.9$"):
        validate_value("frac", FlagSpec(arg="--f", type="float", max=0.9), "1.5")
