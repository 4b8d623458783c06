"""The dialogs' base: a modal screen on a plain background.

Textual's `ModalScreen` dims the screen below by drawing it again, whole, each time any of its
widgets changes: with the journal streaming behind a dialog that was a full-screen render and
tint per batch of lines (a UI test with a dialog open over one streaming host: 55 s of CPU
under the profiler, 15 s without), and the keys typed into the dialog waited behind it. A still
picture of the screen below is cheap but shows whichever moment it was taken at (the footer
before or after it changed for the dialog), so a dialog here stands on its own background:
the live widgets below cost nothing while it is open and are drawn as they are when it closes.
"""

from __future__ import annotations

from textual.screen import ModalScreen, ScreenResultType


class Dialog(ModalScreen[ScreenResultType]):
    """`ModalScreen` with an opaque background (see the module docstring)."""

    DEFAULT_CSS = """
    Dialog { background: $background; }
    Dialog:ansi { background: ansi_default; }
    """
