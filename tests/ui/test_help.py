"""`?` lists exactly the keys that work: q and the arrows included, no host keys beyond the
fleet, sideways scrolling named, and the list scrolls at once (it has the focus)."""

from __future__ import annotations

from textual.widgets import DataTable, Static

from console.app import SpecopsApp
from tests.ui.scripted import ScriptedFleet, profiles
from widgets.help_screen import HelpScreen


async def test_help_lists_the_live_keys_for_this_fleet_and_scrolls() -> None:
    app = SpecopsApp(ScriptedFleet(profiles()))
    assert len(app.host_names) == 2
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause(0.3)
        await pilot.press("question_mark")
        await pilot.pause(0.2)
        screen = app.screen
        assert isinstance(screen, HelpScreen)
        rows = {(keys, what) for keys, what, _ in screen._rows}
        keys = {k for keys, _ in rows for k in keys.split(", ")}
        assert {"q", "up", "down", "left", "right", "1", "2", "?", "A", "f", "h", "R"} <= keys
        assert "3" not in keys and "9" not in keys
        table = screen.query_one(DataTable)
        assert table.has_focus
        hint = " ".join(str(s.render()) for s in screen.query(Static))
        assert "scroll long journal lines sideways" in hint
        await pilot.press("pagedown")
        assert table.cursor_row > 0 or table.scroll_y > 0
        await pilot.press("escape", "q")
