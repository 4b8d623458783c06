"""Cursor keys that keep their order with a priority `enter`.

A screen whose `enter` acts on the highlighted row binds it with priority (so the keys typed
after it reach what it opens), and a priority binding runs as the key is read; the table's
own cursor bindings run only when its message queue gets to them. So in a burst — tmux
delivers `down down down enter` in one read — enter overtook the downs and acted on the row
the cursor had left (the flag editor edited `budget` for `max_running`). These bindings move
the cursor as the keys are read too, in order, while the table has focus.
"""

from __future__ import annotations

from textual.actions import SkipAction
from textual.binding import Binding
from textual.widgets import DataTable

CURSOR_BINDINGS = [
    Binding("down", "move_cursor(1)", show=False, priority=True),
    Binding("up", "move_cursor(-1)", show=False, priority=True),
    Binding("home", "move_cursor(-100000)", show=False, priority=True),
    Binding("end", "move_cursor(100000)", show=False, priority=True),
]


def move_cursor(table: DataTable[object], rows: int, *, focused: bool) -> None:
    """Move `table`'s cursor by `rows` (clamped) now; SkipAction when it has no focus (the
    key is then someone else's: a value field's, a diff's)."""
    if not focused:
        raise SkipAction()
    last = max(0, table.row_count - 1)
    table.move_cursor(row=min(last, max(0, table.cursor_row + rows)))
