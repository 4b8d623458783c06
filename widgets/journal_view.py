"""The live journal: one host or all hosts merged, filtered, pausable, searchable.

A `Log` that keeps rows, not screen text: a journal line arrives as its raw message (with
its host's prefix in the merged view), taken into a bounded list of rows on the app's flush
timer, never per line. What a row looks like on screen (numbers first, control characters
replaced, styled, measured) is worked out only when it is drawn, so a flood costs an append
a line however fast it comes (at 20k lines/s about 1000 lines arrive between two frames, and
a frame shows a screenful of them). Lines that are not one plain printable-ASCII line (a
traceback, a restart marker, tabs, wide characters) are few and become screen text when
they arrive.
Every host keeps its own ring buffer of records, so switching hosts, toggling the filter or
merging re-renders from memory without asking a host again. Scrolling up pauses the tail:
new lines are counted, not written (the view would otherwise shift under the reader as old
lines are pruned), and scrolling back to the end, `G`/`end` or `p` resumes. Search
highlights every occurrence and jumps between them.

Past 500 lines because the rows, their drawing on demand, search, pause and the merged view
share the one bounded list of rows.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterable, Iterator, Mapping, Sequence
from itertools import islice, repeat
from typing import overload

from rich.cells import cell_len
from rich.highlighter import Highlighter
from rich.style import Style
from rich.text import Text
from textual.binding import Binding
from textual.cache import LRUCache
from textual.geometry import Size
from textual.reactive import Reactive
from textual.selection import Selection
from textual.strip import Strip
from textual.widgets import Log

from console.hosts.events import JournalEntry
from console.watch.journal import LineFilter
from widgets.ordered_input import OrderedInput

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


class PromptInput(OrderedInput):
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


class Shown(str):
    """A row that is already screen text (made when it arrived: not a plain one-line record)."""

    __slots__ = ()


Row = str | tuple[str, str]
"""A raw message (one host's view), `(prefix, raw message)` (merged) or `Shown` text."""


def row_text(row: Row) -> str:
    """A row's screen text (before control characters are replaced)."""
    if type(row) is str:
        return display_line(row)
    if isinstance(row, tuple):
        return row[0] + display_line(row[1])
    return row


def _search_text(row: Row) -> str:
    """What a plain search term is looked for in: the raw message (see `_find_matches`)."""
    return row[0] + row[1] if isinstance(row, tuple) else row


def _simple_term(term: str) -> bool:
    """A term found in a row's screen text exactly when it is found in its raw message.

    `numbers_first` only reorders the fields between `, ` (and drops empty ones): a match
    within one field or the head is in both, so only a term that could span a separator
    (holding `, `, ending with `,` or starting with a space) needs the screen text."""
    return ", " not in term and not term.endswith(",") and not term.startswith(" ")


def _text_width(text: str) -> int:
    """Cells of a line of screen text (an ASCII line without tabs is as wide as it is long)."""
    if text.isascii() and "\t" not in text:
        return len(text)
    return cell_len(Log._process_line(text))


class RowLines(Sequence[str]):
    """The view's lines as shown (`JournalView.lines`), each made when it is read."""

    def __init__(self, rows: list[Row]) -> None:
        self._rows = rows

    def __len__(self) -> int:
        return len(self._rows)

    @overload
    def __getitem__(self, index: int) -> str: ...
    @overload
    def __getitem__(self, index: slice) -> list[str]: ...
    def __getitem__(self, index: int | slice) -> str | list[str]:
        if isinstance(index, slice):
            return [row_text(row) for row in self._rows[index]]
        return row_text(self._rows[index])

    def __iter__(self) -> Iterator[str]:
        return map(row_text, self._rows)


class JournalView(Log):
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
        self.host_note = ""
        """Said after the host's name in the title (an idle host: why its journal is quiet)."""
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
        self._rows: list[Row] = []
        """What the view shows, a row a screen line (`Log._lines` stays empty)."""
        self._strips: LRUCache[tuple[type, Row], Strip] = LRUCache(512)
        """Rows drawn lately, by row: a row keeps its strip however far pruning moves it."""
        self._pending: list[Row] = []
        self._pending_width = 0
        """The widest of `_pending` (cells; at least as wide as any of them is drawn)."""
        self._fresh = 0
        """Rows added to `_pending` since the last flush."""
        self._host_width = 0
        self._prefixes: dict[str, tuple[str, int]] = {}
        """Each host's merged-view prefix and its width, for the current `_host_width`."""
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

    # --- rows: kept raw, drawn when on screen ------------------------------------------

    @property
    def lines(self) -> Sequence[str]:
        """The lines as shown (made from the rows as they are read)."""
        return RowLines(self._rows)

    @property
    def line_count(self) -> int:
        return len(self._rows)

    def write_lines(self, lines: Iterable[str], scroll_end: bool | None = None) -> JournalView:
        """Add lines of screen text (as `Log.write_lines`: each split at its line breaks)."""
        shown = [Shown(part) for line in lines for part in line.splitlines()]
        self._write_rows(list(shown), max(map(_text_width, shown), default=0), scroll_end)
        return self

    def write(self, data: str, scroll_end: bool | None = None) -> JournalView:
        """As `write_lines([data])`: rows are whole lines (`Log.write` continues the last)."""
        return self.write_lines([data], scroll_end)

    def _write_rows(self, rows: list[Row], widest: int, scroll_end: bool | None = None) -> None:
        """`Log.write_lines` for rows: no splitting, measuring or text made here."""
        at_end = self.is_vertical_scroll_end
        auto_scroll = self.auto_scroll if scroll_end is None else scroll_end
        self._rows.extend(rows)
        self._prune_max_lines()
        self._width = max(self._width, widest)
        self.virtual_size = Size(self._width, len(self._rows))
        if auto_scroll and not self.is_vertical_scrollbar_grabbed and at_end:
            self.scroll_end(animate=False, immediate=True, x_axis=False)
        else:
            self.refresh()

    def _prune_max_lines(self) -> None:
        extra = len(self._rows) - self.buffer_lines
        if extra > 0:
            del self._rows[:extra]

    def clear(self) -> JournalView:
        self._rows.clear()
        self._strips.clear()
        super().clear()
        return self

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._strips.clear()

    def selection_updated(self, selection: Selection | None) -> None:
        self._strips.clear()
        super().selection_updated(selection)

    def get_selection(self, selection: Selection) -> tuple[str, str] | None:
        return selection.extract("\n".join(self.lines)), "\n"

    def _render_line(self, y: int, scroll_x: int, width: int) -> Strip:
        rich_style = self.rich_style
        if y >= len(self._rows):
            return Strip.blank(width, rich_style)
        line = self._render_line_strip(y, rich_style)
        line = line.crop_extend(scroll_x, scroll_x + width, rich_style)
        return line.apply_offsets(scroll_x, y)

    def _render_line_strip(self, y: int, rich_style: Style) -> Strip:
        """One row as drawn: its screen text made now, styled, highlighted, selected."""
        row = self._rows[y]
        key = (type(row), row)
        selection = self.text_selection
        if selection is None and (strip := self._strips.get(key)) is not None:
            return strip
        text = self._process_line(row_text(row))
        line_text = Text(text, no_wrap=True)
        line_text.stylize(rich_style)
        if self.highlight:
            line_text = self.highlighter(line_text)
        if selection is not None and (span := selection.get_span(y - self._clear_y)) is not None:
            start, end = span
            if end == -1:
                end = len(line_text)
            selection_style = self.screen.get_component_rich_style("screen--selection")
            line_text.stylize(selection_style, start, end)
        strip = Strip(line_text.render(self.app.console), cell_len(text))
        if selection is None:
            self._strips[key] = strip
        return strip

    # --- what to show ------------------------------------------------------------------

    def filter_for(self, host: str) -> LineFilter:
        if self.show_all:
            return SHOW_ALL
        if self.custom_filter is not None:
            return self.custom_filter
        return self.filters.get(host, SHOW_ALL)

    def _prefix(self, host: str) -> tuple[str, int]:
        """The merged view's `host │ ` and its width in cells."""
        known = self._prefixes.get(host)
        if known is None:
            prefix = f"{host:<{self._host_width}} │ "
            known = self._prefixes[host] = (prefix, cell_len(prefix))
        return known

    def _rows_into(self, rows: list[Row], host: str, records: Iterable[JournalEntry]) -> int:
        """Append the rows `records` (one host's) show to `rows`; returns their widest.

        Per line, as a flood pours in: the filter, a few checks and an append. A record that
        is one plain printable-ASCII line of at most `MAX_LINE` characters (nearly all) is
        kept as it came; its screen text is at most as long (`numbers_first` reorders and
        drops empty fields), and that length is its width. Any other is made into screen
        text now, split at its line breaks, and measured.
        """
        keep = self.filter_for(host)
        accepts = keep.accepts
        prefix, offset = self._prefix(host) if self.merged else ("", 0)
        longest = widest = 0
        for record in records:
            message = record.message
            if (
                message
                and message.isascii()
                and len(message) <= MAX_LINE
                and message.isprintable()
                and not (
                    record.continuation
                    or record.new_invocation
                    or record.dropped
                    or record.read_back
                )
            ):
                if accepts(record):
                    rows.append((prefix, message) if offset else message)
                    if len(message) > longest:
                        longest = len(message)
                continue
            for line in keep.visible(record):
                for part in (prefix + display_line(line)).splitlines():
                    rows.append(Shown(part))
                    widest = max(widest, _text_width(part))
        return max(longest + offset if longest else 0, widest)

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
        """Keep a delivered batch; rows for the current view wait for the next `flush`."""
        buffer = self.records.get(host)
        if buffer is None:
            buffer = self.records[host] = deque(maxlen=self.buffer_lines)
            if len(host) > self._host_width:
                self._host_width = len(host)
                self._prefixes.clear()
        records = records if isinstance(records, (list, tuple)) else list(records)
        buffer.extend(records)
        self.merged_records.extend(zip(repeat(host), records))
        if self.merged or host == self.host:
            before = len(self._pending)
            widest = self._rows_into(self._pending, host, records)
            self._fresh += len(self._pending) - before
            self._pending_width = max(self._pending_width, widest)
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
        widest, self._pending_width = self._pending_width, 0
        at_end = self.is_vertical_scroll_end
        self._write_rows(pending, widest)
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
        rows: list[Row] = []
        widest = 0
        for host, record in self._newest_shown(REDRAW_RECORDS):
            widest = max(widest, self._rows_into(rows, host, (record,)))
        self._pending = []
        self._pending_width = 0
        self._fresh = self.pending_lines = 0
        self.user_paused = False
        self.clear()
        self._write_rows(rows[-self.buffer_lines :], widest, scroll_end=True)
        self.scroll_end(animate=False, immediate=True)
        self._find_matches()
        self._update_subtitle()

    # --- operator actions --------------------------------------------------------------

    def show_host(self, host: str, note: str = "") -> None:
        self.host, self.host_note = host, note
        if not self.merged:
            self.rerender()

    def set_host_note(self, note: str) -> None:
        if note != self.host_note:
            self.host_note = note
            self._update_subtitle()

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
        self._strips.clear()  # drawn with the old term's highlights
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
        search = re.compile(re.escape(term), flags).search
        # A plain term is looked for in the raw rows (the same answer, see `_simple_term`):
        # making the screen text of every buffered row was ~10 ms a search and a `n`.
        text = _search_text if _simple_term(term) else row_text
        self.search_matches = [i for i, row in enumerate(self._rows) if search(text(row))]
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
        title = "journal · " + ("all hosts" if self.merged else (self.host or "-"))
        if self.host_note and not self.merged:
            title += f" · {self.host_note}"
        self.border_title = title
        self.set_class(self.paused, "-paused")
