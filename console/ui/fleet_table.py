"""The fleet table's keys: which host is selected, and how the table is grouped, sorted and
filtered (`1`–`9`, `tab`, `g`, `o`, `O`, `F`).

The selected host drives the views under the table: its journal, its line in the chart and
its stats (monitoring.py).
"""

from __future__ import annotations

from textual import on
from textual.widgets import Input

from console.fleet.filter import FilterError, parse_filter
from console.ui.monitoring import Monitoring
from widgets.accept_chart import AcceptChart
from widgets.host_table import HostTable
from widgets.journal_view import JournalView, PromptInput


class FleetTable(Monitoring):
    """Selection follows the table's cursor; the order and the filter are the table's own."""

    @on(HostTable.RowHighlighted, "#hosts")
    def _row_highlighted(self, message: HostTable.RowHighlighted) -> None:
        view = self.main(JournalView)
        if view is not None:
            host = message.host
            view.show_host(host, self._journal_note(host))
            if chart := self.main(AcceptChart):
                chart.select(host)
            # The stats panel follows a frame later: its windows over up to 20,000 samples
            # took 3-4 ms of the repaint a key press waits for (it is redrawn every second
            # anyway). The selected host is opened (on-demand mode) once the cursor's scroll
            # has been drawn, with the rows that came on screen.
            self.call_after_refresh(self._show_stats)
            self.call_after_refresh(self._publish_on_screen)

    def action_select_index(self, index: int) -> None:
        """The host numbered `index` in the `#` column, wherever sorting put it."""
        table = self.main(HostTable)
        if table is not None and 1 <= index <= len(self.host_names):
            name = self.host_names[index - 1]
            if not table.select_host(name):
                self.notify(f"{name} is hidden by the host filter (F)", title="hosts")

    def action_next_host(self) -> None:
        if len(self.screen_stack) > 1:  # in a dialog, tab keeps its usual meaning
            self.screen.focus_next()
            return
        table = self.main(HostTable)
        if table is not None and table.names:
            table.move_cursor(row=(table.cursor_row + 1) % len(table.names))

    def action_group_hosts(self) -> None:
        if table := self.main(HostTable):
            table.set_grouped(not table.grouped)
            self._chart_follows_table()

    def action_sort_hosts(self) -> None:
        if table := self.main(HostTable):
            table.cycle_sort()
            self._chart_follows_table()

    def action_reverse_hosts(self) -> None:
        if table := self.main(HostTable):
            table.reverse_sort()
            self._chart_follows_table()

    def action_filter_hosts(self) -> None:
        table, prompt = self.main(HostTable), self.main(PromptInput, "#fleet-filter")
        if table is not None and prompt is not None and self.screen is self.screen_stack[0]:
            prompt.open(table.host_filter.text)

    @on(Input.Submitted, "#fleet-filter")
    def _fleet_filter_submitted(self, message: Input.Submitted) -> None:
        table, prompt = self.main(HostTable), self.main(PromptInput, "#fleet-filter")
        if table is None or prompt is None:
            return
        try:
            query = parse_filter(message.value, table.groups)
        except FilterError as exc:  # the prompt stays open with the text to fix
            self.notify(str(exc), title="host filter", severity="error", markup=False)
            return
        table.set_filter(query)
        self._chart_follows_table()
        prompt.action_close()
        if query.terms and not table.names:
            self.notify(f"no host matches {query.text!r}", title="host filter")
