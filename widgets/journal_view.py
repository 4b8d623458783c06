"""The live journal: one host or all hosts merged, filtered, pausable, searchable.

A `Log` (not `RichLog`: it renders only visible lines and keeps plain strings) written in
batches on the app's flush timer, never per line. Every host keeps its own ring buffer of
records, so switching hosts, toggling the filter or merging re-renders from memory without
asking a host again. Scrolling up pauses the tail: new lines are counted, not written (the
view would otherwise shift under the reader as old lines are pruned), and scrolling back to
the end, `G`/`end` or `p` resumes. Search highlights every occurrence and jumps between them.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterable, Mapping
from itertools import islice

from rich.highlighter import Highlighter
from rich.style import Style
from rich.text import Text
from textual.binding import Binding
from textual.geometry import Size
from textual.reactive import Reactive
from textual.widgets import Input

from console.events import JournalEntry
from console.watch.journal import LineFilter
from widgets.line_log import LineLog

MAX_LINE = 2000
"""Characters shown of one line (the rest is cut with an ellipsis)."""
SHOW_ALL = LineFilter()


_BATCH = re.compile(r"^(?P<head>.*?\b(?:Decode|Prefill) batch), (?P<fields>.*)$")
_FIRST = ("accept len", "gen throughput", "input throughput")
"""A batch line's fields an operator reads first, in this order."""


def _batch_name_end(message: str) -> int:
    """Where the first `Decode batch` or `Prefill batch` (a word, then `, `) ends; -1 if none.

    `str.find` and two comparisons: what `_BATCH` finds, for a tenth of its cost."""
    at = message.find(" batch, ")
    while at >= 0:
        for name in ("Decode", "Prefill"):
            start = at - len(name)
            if message.startswith(name, start) and start >= 0:
                before = message[start - 1] if start else " "
                if not (before.isalnum() or before == "_"):
                    return at + 6
        at = message.find(" batch, ", at + 1)
    return -1


def numbers_first(message: str) -> str:
    """A decode/prefill line with accept len and throughput moved to the front.

    SGLang logs them after the request counts, so on an 80-column terminal the line ended
    before `accept len`; every field stays, word for word (searches still find them).
    Runs for every line the view shows (a flood is all batch lines): one search and one
    pass over the fields, not a regular expression over the whole line and a scan per name.
    """
    if "batch, " not in message:
        return message
    if "\n" in message:  # `.` stops at a newline: only a line's own text is reordered
        match = _BATCH.match(message)
        if match is None:
            return message
        head, text = match["head"], match["fields"]
    else:
        end = _batch_name_end(message)
        if end < 0:
            return message
        head, text = message[:end], message[end + 2 :]
    accept: list[str] = []
    gen: list[str] = []
    inp: list[str] = []
    rest: list[str] = []
    for field in text.split(", "):
        if not field:
            continue
        if field.startswith(_FIRST):
            (accept if field[0] == "a" else gen if field[0] == "g" else inp).append(field)
        else:
            rest.append(field)
    if not (accept or gen or inp):
        return message
    return f"{head}, {', '.join(accept + gen + inp + rest)}"


def display_line(message: str) -> str:
    """One screen line: the last tqdm segment of `\\r` text, numbers first, absurd lengths cut."""
    if "\r" in message:
        message = message.rstrip("\r").rsplit("\r", 1)[-1]
    message = numbers_first(message)
    if len(message) > MAX_LINE:
        message = message[:MAX_LINE] + " …"
    return message


class _MatchHighlighter(Highlighter):
    """Marks every occurrence of the search term (smart case, like less and journalctl)."""

    def __init__(self, term: str, style: Style) -> None:
        self.term = term
        self.style = style
        self.case_sensitive = term != term.lower()

    def highlight(self, text: Text) -> None:
        text.highlight_words([self.term], self.style, case_sensitive=self.case_sensitive)


class PromptInput(Input):
    """A one-line prompt under the journal (filter, search); `escape` puts it away."""

    BINDINGS = [Binding("escape", "close", "Close", id="prompt-close", show=False)]
    DEFAULT_CSS = """
    PromptInput { dock: bottom; display: none; }
    PromptInput.-open { display: block; }
    """

    def open(self, value: str = "") -> None:
        self.value = value
        self.cursor_position = len(value)
        self.add_class("-open")
        self.focus()

    def action_close(self) -> None:
        self.remove_class("-open")
        self.screen.query_one(JournalView).focus()


REDRAW_RECORDS = 1000


class JournalView(LineLog):
    # Log grows its virtual size with every write, and Textual lays out the whole screen
    # on any virtual size change: 20 full layouts a second while lines pour in. The log's
    # own box never changes size, so only its scrollbars need updating (see the watcher).
    virtual_size: Reactive[Size] = Reactive(Size(0, 0), layout=False)

    """Shows one host (or all, merged); each host's records are kept in its own ring buffer."""

    COMPONENT_CLASSES = {"journal-view--match"}
    DEFAULT_CSS = """
    JournalView { border: round $primary-background; height: 1fr; }
    JournalView.-paused { border: round $warning; }
    JournalView > .journal-view--match { background: $warning 60%; color: $text; }
    """

    def __init__(
        self,
        buffer_lines: int = 5000,
        filters: Mapping[str, LineFilter] | None = None,
        **kwargs: object,
    ) -> None:
        super().__init__(max_lines=buffer_lines, highlight=False, auto_scroll=True, **kwargs)  # type: ignore[arg-type]
        self.buffer_lines = buffer_lines
        self.filters = dict(filters or {})
        """Each host's default filter (its profile's patterns)."""
        self.records: dict[str, deque[JournalEntry]] = {}
        self.merged_records: deque[tuple[str, JournalEntry]] = deque(maxlen=buffer_lines)
        self.host: str | None = None
        self.merged = False
        self.show_all = False
        self.custom_filter: LineFilter | None = None
        """A filter typed by the operator (`e`), replacing every host's default."""
        self.user_paused = False
        self.pending_lines = 0
        """Lines that arrived while paused (the newest `buffer_lines` of them are kept)."""
        self.search_term: str | None = None
        self.search_matches: list[int] = []
        self.search_index = -1
        self._pending: list[str] = []
        self._fresh = 0
        """Lines added to `_pending` since the last flush."""
        self._host_width = 0
        self._following = True
        """The view was at its end when last scrolled: it keeps the tail through resizes (a
        panel opening took rows) and only the operator's own scroll or `p` pauses it."""
        self.crashes_while_paused = 0

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        self._following = self.is_vertical_scroll_end

    def on_resize(self) -> None:
        if self._following and not self.user_paused:
            self.scroll_end(animate=False, immediate=True)

    def watch_virtual_size(self, size: Size) -> None:
        bars = (self.show_vertical_scrollbar, self.show_horizontal_scrollbar)
        self._scroll_update(size)
        # A scrollbar appearing or going changes the content region: that needs a layout.
        changed = bars != (self.show_vertical_scrollbar, self.show_horizontal_scrollbar)
        self.refresh(layout=changed)

    # --- what to show ------------------------------------------------------------------

    def filter_for(self, host: str) -> LineFilter:
        if self.show_all:
            return SHOW_ALL
        if self.custom_filter is not None:
            return self.custom_filter
        return self.filters.get(host, SHOW_ALL)

    def _render_record(self, host: str, record: JournalEntry) -> list[str]:
        lines = [display_line(line) for line in self.filter_for(host).visible(record)]
        if self.merged:
            prefix = f"{host:<{self._host_width}} │ "
            lines = [prefix + line for line in lines]
        return lines

    def _newest_shown(self, count: int) -> list[tuple[str, JournalEntry]]:
        """The newest `count` records of the current view, oldest first.

        Read from the buffers' ends: walking a full buffer (20,000 records) to keep its last
        thousand was most of a host switch.
        """
        if self.merged:
            return list(islice(reversed(self.merged_records), count))[::-1]
        if self.host is None:
            return []
        buffer = self.records.get(self.host, ())
        return [(self.host, record) for record in islice(reversed(buffer), count)][::-1]

    @property
    def paused(self) -> bool:
        return self.user_paused or not self._following

    def note_crash(self) -> None:
        """A crash line arrived while paused: the subtitle says so until the tail resumes."""
        if self.paused:
            self.crashes_while_paused += 1
            self._update_subtitle()

    # --- data in -----------------------------------------------------------------------

    def add(self, host: str, records: Iterable[JournalEntry]) -> None:
        """Keep a delivered batch; lines for the current view wait for the next `flush`."""
        buffer = self.records.get(host)
        if buffer is None:
            buffer = self.records[host] = deque(maxlen=self.buffer_lines)
            self._host_width = max(self._host_width, len(host))
        visible = self.merged or host == self.host
        for record in records:
            buffer.append(record)
            self.merged_records.append((host, record))
            if visible:
                lines = self._render_record(host, record)
                self._pending.extend(lines)
                self._fresh += len(lines)
        if len(self._pending) > 2 * self.buffer_lines:
            self._pending = self._pending[-self.buffer_lines :]

    def flush(self) -> None:
        """Called on a timer: one write for everything that arrived since the last frame."""
        if not self._pending:
            return
        if self.paused:
            self.pending_lines += self._fresh
            self._fresh = 0
            self._pending = self._pending[-self.buffer_lines :]
            self._update_subtitle()
            return
        self._fresh = 0
        pending, self._pending = self._pending[-self.buffer_lines :], []
        at_end = self.is_vertical_scroll_end
        self.write_lines(pending)
        if not at_end:  # following, but the view lost rows since its last scroll
            self.scroll_end(animate=False, immediate=True)
        if self.pending_lines:
            self.pending_lines = 0
            self._update_subtitle()

    def rerender(self) -> None:
        """Draw the current view again from the buffers (host, filter or mode changed).

        Only the newest `REDRAW_RECORDS` records are drawn at once: selecting a host is a
        key press and must repaint at once, while drawing every buffered record took
        60-150 ms with full buffers (bench/ui.py keys). New lines extend the scrollback again.
        """
        lines: list[str] = []
        for host, record in self._newest_shown(REDRAW_RECORDS):
            lines.extend(self._render_record(host, record))
        self._pending = []
        self._fresh = self.pending_lines = 0
        self.user_paused = False
        self.clear()
        self.write_lines(lines[-self.buffer_lines :], scroll_end=True)
        self.scroll_end(animate=False, immediate=True)
        self._find_matches()
        self._update_subtitle()

    # --- operator actions --------------------------------------------------------------

    def show_host(self, host: str) -> None:
        self.host = host
        if not self.merged:
            self.rerender()

    def toggle_merged(self) -> None:
        self.merged = not self.merged
        self.rerender()

    def toggle_all(self) -> None:
        self.show_all = not self.show_all
        self.rerender()

    def set_custom_filter(self, pattern: str) -> None:
        """An operator's regex for every host; empty goes back to the profiles' patterns.

        Raises ValueError (naming the pattern) when it does not compile.
        """
        self.custom_filter = LineFilter([pattern]) if pattern.strip() else None
        self.show_all = False
        self.rerender()

    @property
    def filter_text(self) -> str:
        """The filter as one editable regex (the patterns joined: any of them matches)."""
        if self.custom_filter is not None:
            return "|".join(self.custom_filter.patterns)
        return "|".join(self.filter_for(self.host or "").patterns)

    def toggle_pause(self) -> None:
        if self.paused:
            self.resume()
        else:
            self.user_paused = True
            self._update_subtitle()

    def resume(self) -> None:
        """Back to the tail: write what arrived meanwhile and follow again."""
        self.user_paused = False
        self._following = True
        self.scroll_end(animate=False, immediate=True)
        self.flush()
        self.pending_lines = self.crashes_while_paused = 0
        self._update_subtitle()

    def action_scroll_end(self) -> None:
        self.resume()

    def search(self, term: str) -> None:
        """Highlight `term` and jump to its newest occurrence; empty ends the search."""
        self.search_term = term or None
        if self.search_term is None:
            self.highlight = False
            self.search_matches, self.search_index = [], -1
            if self.paused:
                self.resume()  # the search is over: back to the tail it paused
        else:
            style = self.get_component_rich_style("journal-view--match")
            self.highlighter = _MatchHighlighter(self.search_term, style)
            self.highlight = True
            self._find_matches()
            if self.search_matches:
                self.search_index = len(self.search_matches) - 1
                self._show_match()
        self.refresh()
        self._update_subtitle()

    def search_next(self, older: bool = True) -> None:
        """The next match up (older) or down (newer), wrapping around."""
        if self.search_term is None:
            return
        # Lines arrived (and old ones were pruned) since the last look: find them again.
        at = self.search_matches[self.search_index] if self.search_matches else None
        self._find_matches()
        if at is not None and at in self.search_matches:
            self.search_index = self.search_matches.index(at)
        if not self.search_matches:
            self._update_subtitle()
            return
        step = -1 if older else 1
        self.search_index = (self.search_index + step) % len(self.search_matches)
        self._show_match()
        self._update_subtitle()

    def _find_matches(self) -> None:
        term = self.search_term
        if term is None:
            return
        flags = 0 if term != term.lower() else re.IGNORECASE
        needle = re.compile(re.escape(term), flags)
        self.search_matches = [i for i, line in enumerate(self.lines) if needle.search(line)]
        if self.search_index >= len(self.search_matches):
            self.search_index = len(self.search_matches) - 1

    def _show_match(self) -> None:
        line = self.search_matches[self.search_index]
        self.scroll_to(y=max(0, line - self.size.height // 2), animate=False, immediate=True)
        if not self.is_vertical_scroll_end:
            self.user_paused = True  # reading a match: the tail must not move it away

    # --- copy and save ---------------------------------------------------------------------

    def visible_text(self) -> str:
        """The lines on screen right now, as shown."""
        top = int(self.scroll_offset.y)
        return "\n".join(self.lines[top : top + self.scrollable_content_region.height])

    def current_line(self) -> str | None:
        """The line a search is on, else the newest line."""
        if self.search_term is not None and self.search_matches:
            return self.lines[self.search_matches[self.search_index]]
        return self.lines[-1] if self.lines else None

    @property
    def view_name(self) -> str:
        return "all-hosts" if self.merged else (self.host or "journal")

    def _update_subtitle(self) -> None:
        if self.show_all:
            what = "all lines"
        elif self.custom_filter is not None:
            what = f"filter: {self.filter_text}"
        else:
            what = "profile patterns"
        parts = [what]
        if self.search_term is not None:
            found = len(self.search_matches)
            at = f"{self.search_index + 1}/{found}" if found else "no match"
            parts.append(f"search {self.search_term!r}: {at}")
        if self.paused:
            crashes = self.crashes_while_paused
            crashed = (
                f" · {crashes} crash{'es' if crashes > 1 else ''} (A lists)" if crashes else ""
            )
            parts.append(f"paused · {self.pending_lines} new lines{crashed} · G or p resumes")
        self.border_subtitle = " · ".join(parts)
        self.border_title = "journal · " + ("all hosts" if self.merged else (self.host or "-"))
        self.set_class(self.paused, "-paused")
