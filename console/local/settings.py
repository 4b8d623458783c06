"""User settings: one TOML file in the user's config dir, validated like profiles.

`~/.config/specops/settings.toml` (XDG_CONFIG_HOME honoured; SPECOPS_SETTINGS points at
another file). Environment variables `SPECOPS_<FIELD>` override the file. Unknown keys are
errors that name the file, so a typo in a keymap never passes silently.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationError
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from console.hosts.profiles import ProfileError, format_validation


def config_dir() -> Path:
    """The user's specops config directory; tests point XDG_CONFIG_HOME elsewhere."""
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "specops"


STATE_DIR_ENV = "SPECOPS_STATE_DIR"
"""Names a state directory to use instead of the user's (`specops demo` keeps its own)."""


def state_dir() -> Path:
    """Where specops keeps what it learns (audit log, the ledger's cache, saved views)."""
    override = os.environ.get(STATE_DIR_ENV)
    if override:
        return Path(override)
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "specops"


CONNECT_BUDGET = 32
"""SSH connection attempts in flight at once, by default."""
IDLE_CLOSE_S = 60.0
"""In on-demand mode, how long a host nobody wants any more stays open, by default."""


def settings_path() -> Path:
    override = os.environ.get("SPECOPS_SETTINGS")
    return Path(override) if override else config_dir() / "settings.toml"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(extra="forbid", frozen=True, env_prefix="SPECOPS_")

    theme: str = "textual-dark"
    """A Textual theme name (`ctrl+p` → "theme" lists them)."""
    keymap: dict[str, str] = Field(default_factory=dict)
    """Binding id → keys, e.g. `{ "snapshot-host" = "ctrl+t", "quit" = "q,f10" }`."""
    journal_lines: int = Field(default=5000, ge=100, le=200_000)
    """Records kept per host, and for the merged view, by the journal view's ring buffers."""
    read_only: bool = False
    """Refuse every action that changes a host (same as `--read-only`)."""
    profiles_dir: Path | None = None
    """Where profiles live when `--profiles` is not given and ./profiles has none."""
    inventory: Path | None = None
    """An Ansible inventory (or a saved `ansible-inventory --list` JSON) naming the hosts; the
    profiles directory then holds the templates (`all.toml`, `GROUP.toml`, `HOST.toml`)."""
    prometheus_url: str | None = None
    """A Prometheus that scrapes the hosts' SGLang /metrics (`http://HOST:9090`): `specops
    metrics` then reads every host from it with one query per metric."""
    server_metrics_s: float = Field(default=0.0, ge=0, le=3600)
    """The TUI also reads each server's /metrics every this many seconds (0: off), or, with
    `prometheus_url`, the whole fleet from Prometheus; the journal's numbers take precedence."""

    connect_budget: int = Field(default=CONNECT_BUDGET, ge=1, le=1024)
    """SSH connection attempts in flight at once (the rest queue; a slot is held for one
    attempt, at most the profile's `connect_timeout_s`): 200 hosts do not make 200 key
    exchanges together, on this machine or on a jump host."""

    follow: Literal["all", "on-demand"] = "all"
    """Which hosts the TUI keeps connected: `all` (each host's journal followed all the time,
    so crash signatures are seen on every host), or `on-demand` (only the hosts on screen,
    selected, acted on or on probation; the others are closed after `idle_close_s` and read
    back what they logged meanwhile when opened again). The headless commands connect to the
    hosts they name either way."""
    idle_close_s: float = Field(default=IDLE_CLOSE_S, ge=0, le=86_400)
    """On demand: how long a host stays open after nothing wants it any more (its row
    scrolled off, another host selected, its action done), so scrolling past a page of rows
    and back does not close and reopen their connections."""

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (
            init_settings,
            env_settings,
            TomlConfigSettingsSource(settings_cls, toml_file=settings_path()),
        )


def load_settings() -> Settings:
    """The user's settings; a bad file raises ProfileError naming file, field and value."""
    path = settings_path()
    try:
        return Settings()
    except ValidationError as exc:
        raise ProfileError(format_validation(path, exc)) from None
    except (OSError, ValueError) as exc:
        raise ProfileError(f"{path}: {exc}") from None
