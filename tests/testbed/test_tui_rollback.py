"""`R` in the TUI against real systemd: back to the configuration before the current one.

The changes before it are made with the real CLI; the TUI is driven by keys (Pilot) over its
own SSH sessions to the host. What counts is what the host says afterwards, asked directly:
`systemctl cat` for the effective unit, /proc for the argv systemd really started, and the
history file in the host's /var/lib/specops.
"""

from __future__ import annotations

import asyncio

import pytest
from textual.widgets import DataTable, Static

from console.app import SpecopsApp
from console.fleet.fleet import Fleet
from console.hosts.events import RolloutOutcome
from console.hosts.profiles import load_fleet
from tests.testbed.bed import Testbed
from tests.testbed.test_rollout import effective, flags_of, running_argv
from tests.testbed.test_soak import host_history, specops_set
from tests.ui.support import until
from widgets.history_view import HistoryScreen
from widgets.rollback_confirm import RollbackConfirmScreen
from widgets.rollout_view import RolloutScreen

pytestmark = pytest.mark.testbed


@pytest.mark.timeout(300)
async def test_R_rolls_a_real_host_back_to_the_configuration_before_the_current_one(
    bed: Testbed,
) -> None:
    host = bed.hosts[0]
    for window in ("2048", "1024"):
        code, output = await asyncio.to_thread(
            specops_set, bed, host, f"window={window}", "--soak", "2", timeout=120
        )
        assert code == 0, output
    assert flags_of(bed, host, effective(host))["window"] == 1024
    app = SpecopsApp(Fleet(load_fleet(bed.profiles_dir)))
    async with app.run_test(size=(140, 44)) as pilot:
        await until(pilot, lambda: getattr(app.fleet.status.get(host.name), "flags", None))
        assert app.selected_host == host.name
        await pilot.press("h")  # the history, as the host has it
        await until(pilot, lambda: isinstance(app.screen, HistoryScreen))
        screen = app.screen
        assert isinstance(screen, HistoryScreen)
        await until(pilot, lambda: screen.history is not None, timeout=30)
        table = screen.query_one(DataTable)
        shown = [[str(c) for c in table.get_row_at(i)] for i in range(table.row_count)]
        assert [(r[0], r[1], r[2], r[3]) for r in shown] == [
            ("2", "now·good", "kept", "window=1024"),
            ("1", "", "kept", "window=2048"),
            ("0", "", "original", "the unit's own values"),
        ]
        await pilot.press("escape", "R")
        await until(pilot, lambda: isinstance(app.screen, RollbackConfirmScreen))
        confirm = app.screen
        assert isinstance(confirm, RollbackConfirmScreen)
        await until(pilot, lambda: confirm.plan is not None, timeout=60)  # --help check too
        diff = str(confirm.query_one("#rollback-diff-text", Static).render())
        assert "-    --speculative-draft-window-size 1024" in diff
        assert "+    --speculative-draft-window-size 2048" in diff
        await pilot.press("y")
        await until(pilot, lambda: isinstance(app.screen, RolloutScreen))
        view = app.screen
        assert isinstance(view, RolloutScreen)
        await until(pilot, lambda: view.result is not None, timeout=180)
        assert view.result is not None and view.result.outcome is RolloutOutcome.APPLIED
        await pilot.press("escape", "q")
    assert flags_of(bed, host, effective(host))["window"] == 2048
    argv = running_argv(host)
    assert argv[argv.index("--speculative-draft-window-size") + 1] == "2048"
    newest = host_history(host)[0]
    assert (newest["n"], newest["kind"], newest["outcome"]) == (3, "rollback", "kept")
