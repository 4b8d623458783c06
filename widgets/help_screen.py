"""`?`: every key binding that is live on the screen it was opened from, with its id."""

from __future__ import annotations

from collections.abc import Iterable

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.widgets import DataTable, Static

from widgets.dialog import Dialog


def binding_rows(bindings: Iterable[Binding]) -> list[tuple[str, str, str]]:
    """(keys, what it does, binding id) for each binding with a description, deduplicated."""
    rows: dict[tuple[str, str], tuple[str, str, str]] = {}
    for b in bindings:
        if not b.description:
            continue
        keys = b.key_display or b.key
        key = (b.action, b.description)
        if key in rows:
            old = rows[key]
            rows[key] = (f"{old[0]}, {keys}", old[1], old[2] or b.id or "")
        else:
            rows[key] = (keys, b.description, b.id or "")
    # specops' own actions (they have ids) before the widgets' scrolling keys.
    return sorted(rows.values(), key=lambda row: row[2] == "")


class HelpScreen(Dialog[None]):
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > Vertical {
        width: 80; max-width: 100%; height: auto; max-height: 90%;
        border: round $primary; background: $surface; padding: 0 1;
    }
    HelpScreen DataTable { height: auto; max-height: 30; }
    HelpScreen .hint { color: $text-muted; }
    """
    BINDINGS = [
        Binding("escape,q,question_mark", "dismiss", "Close", id="help-close"),
    ]

    def __init__(self, bindings: Iterable[Binding]) -> None:
        super().__init__()
        self._rows = binding_rows(bindings)

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static("[b]specops — keys[/b]")
            table: DataTable[str] = DataTable(cursor_type="row", zebra_stripes=True)
            table.add_columns("key", "action", "id (to remap in settings.toml)")
            for row in self._rows:
                table.add_row(*row)
            yield table
            yield Static(
                "left/right (or shift+wheel) scroll long journal lines sideways · "
                "ctrl+p: command palette with every action · escape: close",
                classes="hint",
            )
