"""What went wrong, as the operator learns of it: crash alerts (notified once per crash loop),
hosts a change did not finish on, and the lists behind them (`A` alerts, `L` audit log)."""

from __future__ import annotations

from textual import on

from console.ui.shell import NOTIFY_TIMEOUT_S, Shell
from widgets.alerts import AlertsScreen, LeftOnUpdated, alert_text
from widgets.audit_view import AuditScreen
from widgets.host_table import HostTable
from widgets.journal_view import JournalView
from widgets.messages import CrashReceived

ALERTS_KEPT = 200
ALERT_TIMEOUT_S = 30.0
"""A crash loop notifies once per this many seconds per host and signature."""


class Alerts(Shell):
    """Crashes and unfinished changes: kept for `A`, marked in the table, notified."""

    _notified: dict[tuple[str, str], float]
    """When each (host, signature) last notified (monotonic)."""

    @on(CrashReceived)
    def _crash(self, message: CrashReceived) -> None:
        crash = message.event
        self.crashes.append(crash)
        if table := self.main(HostTable):
            table.set_crashed(crash.host, True)
        view = self.main(JournalView)
        if view is not None and crash.live:
            view.note_crash()
        key = (crash.host, crash.signature)
        now = self.fleet.clock.monotonic()
        # A crash loop (systemd restarting into the same crash) notifies once per timeout;
        # every run is still in the alerts list. One read back after the host was idle
        # (on-demand mode) is news too: no one saw it happen; its text says when it did.
        fresh = crash.live or crash.read_back
        if fresh and now - self._notified.get(key, -ALERT_TIMEOUT_S) >= ALERT_TIMEOUT_S:
            self._notified[key] = now
            title = f"crash on {crash.host}"
            near = [x.text() for x in self.xids if x.host == crash.host and x.near(crash.timestamp)]
            text = "\n".join([alert_text(crash), *near])  # an Xid read before the crash came
            self.notify(text, title=title, severity="error", timeout=NOTIFY_TIMEOUT_S, markup=False)

    @on(LeftOnUpdated)
    def _left_on_found(self, message: LeftOnUpdated) -> None:
        """A host a change did not finish on: an alert (`A`) and a notification naming what
        it is left on."""
        found = message.event
        self.left_ons.append(found)
        title = f"{found.host}: a change did not finish"
        self.notify(
            found.text(), title=title, severity="warning", timeout=NOTIFY_TIMEOUT_S, markup=False
        )

    def action_show_alerts(self) -> None:
        if table := self.main(HostTable):
            table.mark_seen()  # the operator is looking at them now
        if not isinstance(self.screen, AlertsScreen):
            self.push_screen(AlertsScreen(self.crashes, self.left_ons, self.xids))

    def action_show_audit(self) -> None:
        if len(self.screen_stack) == 1:
            self.push_screen(AuditScreen())
