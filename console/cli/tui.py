"""The TUI launcher: the one place the CLI reaches for Textual (`specops` and `specops demo`).

`console.app` is imported inside `build_app`, so every headless command loads no Textual; the
import-linter contract names this module as its one exception.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from console.audit import AuditLog
from console.cli.common import require_terminal
from console.profiles import Profile
from console.settings import load_settings

if TYPE_CHECKING:
    from console.app import SpecopsApp


def build_app(profiles: list[Profile], *, read_only: bool) -> SpecopsApp:
    """The app as `specops` runs it: the user's settings, every command into the audit log."""
    from console.app import SpecopsApp  # the only place the CLI reaches for Textual
    from console.fleet import Fleet

    settings = load_settings()
    secrets = frozenset().union(*(p.secret_names for p in profiles))
    audit = AuditLog(secrets=secrets)
    fleet = Fleet(
        profiles,
        on_command=audit.record,
        on_action=audit.action,
        server_metrics_s=settings.server_metrics_s,
        prometheus_url=settings.prometheus_url,
        connect_budget=settings.connect_budget,
    )
    return SpecopsApp(fleet, read_only=read_only, settings=settings)


def run_tui(profiles: list[Profile], *, read_only: bool) -> int:
    require_terminal()
    app = build_app(profiles, read_only=read_only)
    app.run()
    return app.return_code or 0
