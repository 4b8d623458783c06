"""The one redaction: every secret form the attack run found, and no ordinary text touched."""

from __future__ import annotations

import pytest

from console.local.redaction import REDACTED, redact, redact_text, unredacted


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("ExecStart=/x --api-key sk-1 --port 1", f"ExecStart=/x --api-key {REDACTED} --port 1"),
        ("--token=abc --tp 8", f"--token={REDACTED} --tp 8"),
        ('Environment="HF_TOKEN=a b" "X=1"', f'Environment="HF_TOKEN={REDACTED}" "X=1"'),
        (
            "Environment=GH_PAT=ghp_1 SMTP_PASS=p",
            f"Environment=GH_PAT={REDACTED} SMTP_PASS={REDACTED}",
        ),
        (
            "OPENAI_API_KEY=sk AWS_SECRET=s DB_PASSWORD=p",
            f"OPENAI_API_KEY={REDACTED} AWS_SECRET={REDACTED} DB_PASSWORD={REDACTED}",
        ),
        ("ServerArgs(api_key='sk-1', port=1)", f"ServerArgs(api_key='{REDACTED}', port=1)"),
        ("-H 'Authorization: Bearer abc.def'", f"-H 'Authorization: Bearer {REDACTED}'"),
        ("https://ops:hunter2@proxy:3128/x", f"https://ops:{REDACTED}@proxy:3128/x"),
    ],
)
def test_secret_forms_are_hidden(text: str, expected: str) -> None:
    assert redact_text(text) == expected
    assert unredacted(text) == [1] and unredacted(expected) == []


@pytest.mark.parametrize(
    "text",
    [
        "Decode batch, #running-req: 22, #token: 23166, token usage: 0.01, accept len: 4.39",
        "ExecStart=/x --speculative-num-draft-tokens 16 --max-total-tokens 9",
        "Environment=SGLANG_DDTREE_MAX_TOPK=4 MAX_TOKENS=8",
        "run --enable-auth-key --port 1",
        "https://host:8443/path and ssh://root@host",
        "monkey=1 keyboard=2",
        # a journal cursor: six assignments nested in one another's values
        "s=3e4726f49b274e43a71cc4492a50c3ff;i=2;b=141d2623ffb2421196e874b629424f12;m=9492;"
        "t=6620f42db1dff;x=3c6ef362",
    ],
)
def test_ordinary_text_is_kept_exactly(text: str) -> None:
    assert redact_text(text) == text


def test_a_profile_can_mark_any_name_secret() -> None:
    assert (
        redact_text("--model-revision abc", {"--model-revision"}) == f"--model-revision {REDACTED}"
    )
    assert (
        redact("run --model-revision abc", {"--model-revision"})
        == f"run --model-revision '{REDACTED}'"
    )
    assert redact_text("WANDB_ENTITY=me", {"WANDB_ENTITY"}) == f"WANDB_ENTITY={REDACTED}"


def test_commands_hide_bearer_and_url_passwords_too() -> None:
    said = redact("curl -H 'Authorization: Bearer abc' https://u:pw@h/")
    assert "abc" not in said and "pw@" not in said


def test_secret_flags_of_a_profile_name_their_argument_and_variable() -> None:
    from pathlib import Path

    from console.hosts.profiles import parse_profile

    flags = {
        "revision": {"arg": "--revision", "type": "str", "secret": True},
        "hub": {"env": "HUB_ID", "type": "str", "secret": True},
        "budget": {"arg": "--speculative-num-draft-tokens", "type": "int"},
    }
    data = {"name": "b300", "ssh": {"host": "h"}, "service": {"unit": "x.service"}, "flags": flags}
    profile = parse_profile(data, Path("b300.toml"))
    assert profile.secret_names == {"revision", "--revision", "hub", "HUB_ID"}


DECODE = "Decode batch, #token: 18380, token usage: 0.01"


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        # The second attack run's misses (issue 30).
        ("--token -secretvalue9", "--token ***"),
        ("--api-key 'sk-1", "--api-key ***"),
        ("curl -H 'X-Api-Key: abc123def' host", "curl -H 'X-Api-Key: ***' host"),
        ("x-api-key=zzz999", "x-api-key=***"),
        # A path to a secret is no secret; the option after a valueless one is no value.
        ("--key-file /etc/keys/a.pem", "--key-file /etc/keys/a.pem"),
        ("--ssl-keyfile-password pw9", "--ssl-keyfile-password ***"),
        ("--api-key --port 3", "--api-key --port 3"),
        # SGLang's decode line counts tokens: `#token: N` is a number, not a credential.
        (DECODE, DECODE),
    ],
)
def test_what_the_attack_run_found_is_hidden_and_nothing_else(text: str, shown: str) -> None:
    assert redact_text(text) == shown


def test_hostile_nesting_ends_hidden() -> None:
    """A hostile journal line (journald keeps up to 48 KiB of one): `a=a=…` nested deeper than
    any real assignment is hidden whole instead of followed to a RecursionError."""
    text = "a=" * 15000 + "1"
    hidden = "a=" * 65 + REDACTED  # 64 deep, as far as a query string's parameters may go
    assert redact_text(text) == hidden
    assert redact(text) == f"'{hidden}'"  # a shell word again


def test_names_after_leading_dots_are_still_names() -> None:
    assert redact_text(".HF_TOKEN=q a.b.token=z") == f".HF_TOKEN={REDACTED} a.b.token={REDACTED}"


@pytest.mark.parametrize("run", ["x.", "x", "a:", "-a ", "..x", "x-x:"], ids=repr)
def test_long_runs_of_name_characters_come_back_whole(run: str) -> None:
    """Runs the patterns once scanned from every position (`x.x.x.…` took 5 s for 30 KiB)."""
    text = run * 12000
    assert redact_text(text) == text
