"""Test isolation: no developer file (HOME, XDG dirs, ssh-agent) ever leaks into a test; each
test's timeout scaled to the machine (tests/pace.py)."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("XDG_STATE_HOME", str(home / ".local" / "state"))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / ".local" / "share"))
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    return home


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Tests skipped for a missing program say so loudly (tests/tools.py)."""
    from tests.tools import MISSING

    skipped = [
        report
        for report in terminalreporter.stats.get("skipped", [])
        if MISSING in str(getattr(report, "longrepr", ""))
    ]
    if skipped:
        terminalreporter.write_sep(
            "!", f"{len(skipped)} TESTS SKIPPED: A PROGRAM THEY RUN IS {MISSING}", yellow=True
        )


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The order the workers are handed the tests in (tests/schedule.py); the per-test timeout
    (pyproject's, or a test's own `timeout` mark) scaled like every real-time bound: a hang
    still fails, a starved core does not."""
    from tests import pace, schedule

    workers = int(getattr(config, "workerinput", {}).get("workercount", 1))
    items[:] = schedule.arrange(items, workers)

    if pace.SLOWER == 1.0:
        return
    default = float(config.getini("timeout") or 0)
    for item in items:
        mark = item.get_closest_marker("timeout")
        seconds = float(mark.args[0]) if mark is not None and mark.args else default
        if seconds > 0:
            item.add_marker(pytest.mark.timeout(pace.bound(seconds)), append=False)
