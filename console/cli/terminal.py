"""The CLI's consoles, which never pass a control character from what they print.

Text specops prints comes from hosts and files it does not control: a bench file's
configuration, a history entry's `who`, a unit's description. Rich writes a string's ESC
and OSC bytes through as they are (`\\x1b]0;…\\x07` retitles the terminal, `\\x1b[2J` clears
it), so every text segment is cleaned as it is written: a control character becomes its
`\\xNN` spelling, visible and harmless. Rich's own styling and cursor moves are not text
segments and pass unchanged; newlines and tabs stay.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from rich.console import Console
from rich.segment import Segment

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def visible(text: str) -> str:
    """`text` with each control character (but newline and tab) spelled `\\xNN`."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


class SafeConsole(Console):
    """A rich Console whose text segments carry no control characters."""

    def _render_buffer(self, buffer: Iterable[Segment]) -> str:
        cleaned = (
            segment
            if segment.control or not _CONTROL.search(segment.text)
            else Segment(visible(segment.text), segment.style, segment.control)
            for segment in buffer
        )
        return super()._render_buffer(cleaned)
