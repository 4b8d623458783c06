"""The TUI launcher: the one place the CLI reaches for Textual (`specops` and `specops demo`).

`console.app` is imported inside `run_tui`, so every headless command loads no Textual; the
import-linter contract names this module as its one exception.
"""

from __future__ import annotations

from console.audit import AuditLog
from console.cli.common import require_terminal
from console.profiles import Profile
from console.settings import load_settings


def run_tui(profiles: list[Profile], *, read_only: bool) -> int:
    require_terminal()
    from console.app import SpecopsApp  # the only place the CLI reaches for Textual
    from console.fleet import Fleet

    settings = load_settings()
    fleet = Fleet(
        profiles,
        on_command=AuditLog().record,
        server_metrics_s=settings.server_metrics_s,
        prometheus_url=settings.prometheus_url,
    )
    app = SpecopsApp(fleet, read_only=read_only, settings=settings)
    app.run()
    return app.return_code or 0
