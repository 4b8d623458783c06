"""User settings: defaults, the TOML file, environment overrides, errors naming the file."""

from __future__ import annotations

from pathlib import Path

import pytest

from console.hosts.profiles import ProfileError
from console.local.settings import load_settings, settings_path


def test_defaults_without_a_file(isolated_home: Path) -> None:
    settings = load_settings()
    assert settings_path() == isolated_home / ".config" / "specops" / "settings.toml"
    assert settings.journal_lines == 5000
    assert settings.read_only is False
    assert settings.keymap == {}


def test_file_values_and_env_override(monkeypatch: pytest.MonkeyPatch) -> None:
    path = settings_path()
    path.parent.mkdir(parents=True)
    path.write_text(
        'theme = "nord"\nread_only = true\njournal_lines = 2000\n[keymap]\nquit = "q,f10"\n'
    )
    settings = load_settings()
    assert (settings.theme, settings.read_only, settings.journal_lines) == ("nord", True, 2000)
    assert settings.keymap == {"quit": "q,f10"}
    monkeypatch.setenv("SPECOPS_JOURNAL_LINES", "3000")
    assert load_settings().journal_lines == 3000


def test_bad_settings_name_file_field_value() -> None:
    path = settings_path()
    path.parent.mkdir(parents=True)
    path.write_text("journal_lines = 5\nthem = 'x'\n")
    with pytest.raises(ProfileError) as err:
        load_settings()
    text = str(err.value)
    assert str(path) in text
    assert "journal_lines" in text and "5" in text
    assert "them" in text


def test_follow_on_demand_from_the_file_or_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    assert (load_settings().follow, load_settings().idle_close_s) == ("all", 60.0)
    path = settings_path()
    path.parent.mkdir(parents=True)
    path.write_text('follow = "on-demand"\nidle_close_s = 90\n')
    assert (load_settings().follow, load_settings().idle_close_s) == ("on-demand", 90.0)
    monkeypatch.setenv("SPECOPS_FOLLOW", "all")
    assert load_settings().follow == "all"


def test_an_unknown_follow_mode_is_refused_naming_file_field_and_value() -> None:
    path = settings_path()
    path.parent.mkdir(parents=True)
    path.write_text('follow = "ondemand"\n')
    with pytest.raises(ProfileError) as err:
        load_settings()
    text = str(err.value)
    assert str(path) in text and "'follow'" in text and "ondemand" in text
    assert "'all' or 'on-demand'" in text


def test_the_command_line_follow_mode_overrides_the_setting() -> None:
    from console.cli import parse_args
    from console.cli.tui import build_app
    from console.hosts.profiles import load_fleet

    profiles = load_fleet(Path(__file__).resolve().parents[3] / "profiles")
    path = settings_path()
    path.parent.mkdir(parents=True)
    path.write_text('follow = "on-demand"\nidle_close_s = 5\n')
    assert build_app(profiles, read_only=False).fleet.demand is not None
    app = build_app(profiles, read_only=False, follow="all")
    assert app.fleet.demand is None
    for argv in (["--follow", "on-demand"], ["--follow", "on-demand", "demo"]):
        assert parse_args(argv).follow == "on-demand"
    assert parse_args(["demo", "--follow", "all"]).follow == "all"
    assert parse_args([]).follow is None  # the setting decides
    with pytest.raises(SystemExit):
        parse_args(["status", "--follow", "all"])  # the headless commands are unchanged
