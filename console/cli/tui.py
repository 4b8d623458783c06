"""The TUI launcher: the one place the CLI reaches for Textual (`specops` and `specops demo`).

`console.app` is imported inside `build_app`, so every headless command loads no Textual; the
import-linter contract names this module as its one exception.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import TYPE_CHECKING

from console.cli.common import require_terminal
from console.hosts.profiles import Profile
from console.local.audit import AuditLog
from console.local.settings import load_settings

if TYPE_CHECKING:
    from console.app import SpecopsApp


FOLLOW_MODES = ("all", "on-demand")


def add_follow_option(parser: argparse.ArgumentParser) -> None:
    """`--follow all|on-demand`, for the commands that run the TUI (`specops`, `demo`); given
    before or after `demo`, either way (absent: `args.follow` is None)."""
    parser.add_argument(
        "--follow",
        choices=FOLLOW_MODES,
        default=argparse.SUPPRESS,
        help="connect to every host (all) or only to the ones on screen, selected, acted on "
        "or on probation (on-demand); default: the `follow` setting, else all",
    )


def build_app(
    profiles: list[Profile],
    *,
    read_only: bool,
    follow: str | None = None,
    notes: Sequence[str] = (),
) -> SpecopsApp:
    """The app as `specops` runs it: the user's settings, every command into the audit log;
    `follow` (the command line's `--follow`) overrides the setting; `notes` are shown once
    it starts (inventory hosts that could not be used)."""
    from console.app import SpecopsApp  # the only place the CLI reaches for Textual
    from console.fleet.fleet import Fleet

    settings = load_settings()
    if follow is not None:
        settings = settings.model_copy(update={"follow": follow})
    secrets = frozenset().union(*(p.secret_names for p in profiles))
    audit = AuditLog(secrets=secrets)
    fleet = Fleet(
        profiles,
        on_command=audit.record,
        server_metrics_s=settings.server_metrics_s,
        prometheus_url=settings.prometheus_url,
        connect_budget=settings.connect_budget,
        on_demand=settings.follow == "on-demand",
        idle_close_s=settings.idle_close_s,
    )
    return SpecopsApp(fleet, read_only=read_only, settings=settings, notes=notes)


def run_tui(
    profiles: list[Profile],
    *,
    read_only: bool,
    follow: str | None = None,
    notes: Sequence[str] = (),
) -> int:
    require_terminal()
    app = build_app(profiles, read_only=read_only, follow=follow, notes=notes)
    app.run()
    return app.return_code or 0
