"""A Textual `Log` that measures the lines it is given as it writes them.

`Log` starts a thread worker on every write to find the widest new line: a thread, a task
and a dozen objects of cyclic garbage per write. Under a flood of journal lines that garbage
piled up between the collector's rare older-generation passes (minutes apart) and RSS grew
by ~20 MB at 20k lines/s; the threads also competed with the screen for the GIL. Measuring
in the write is cheaper: an ASCII line without tabs is as wide as it is long.
"""

from __future__ import annotations

from rich.cells import cell_len
from textual.widgets import Log


class LineLog(Log):
    """`Log`, minus the thread worker per write."""

    def _update_size(self, updates: int, lines: list[str]) -> None:  # type: ignore[override]
        if lines:
            process = self._process_line
            widest = max(
                len(line) if line.isascii() and "\t" not in line else cell_len(process(line))
                for line in lines
            )
            self._update_maximum_width(updates, widest)
