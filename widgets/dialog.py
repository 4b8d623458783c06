"""A modal screen over a still picture of the screen below it.

Textual's `ModalScreen` dims the screen below by drawing it again, whole, each time any of its
widgets changes: with the journal streaming behind a dialog that is a full-screen render and tint
per batch of lines, and the keys typed into the dialog wait behind it. Every dialog here shows
the screen below as it was when the dialog opened (drawn again only when the terminal's size
changes): the context stays visible, dimmed, and the live widgets behind cost nothing to draw
until the dialog closes.
"""

from __future__ import annotations

from rich.console import Console, ConsoleOptions, RenderableType, RenderResult
from rich.segment import Segment
from textual.screen import ModalScreen, ScreenResultType


class Still:
    """A renderable drawn once per size and then repeated."""

    def __init__(self, source: RenderableType) -> None:
        self.source = source
        self._size: tuple[int, int | None] | None = None
        self._segments: list[Segment] = []

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        size = (options.max_width, options.height)
        if size != self._size:
            self._segments = list(console.render(self.source, options))
            self._size = size
        return iter(self._segments)


class Dialog(ModalScreen[ScreenResultType]):
    """`ModalScreen` whose dimmed background is a still picture (see the module docstring)."""

    _still: Still | None = None

    def render(self) -> RenderableType:
        below = super().render()
        if self._still is None or self._still.source.__class__ is not below.__class__:
            self._still = Still(below)
        return self._still
