"""The command palette's entries: every bound action, namespaced, plus one per host.

Titles read `namespace: action` (posting's convention) so typing `snap` or `flags` finds
the whole family. The namespace comes from the binding id's first word.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from textual.binding import Binding

NAMESPACES = {
    "host": "host",
    "next": "host",
    "hosts": "hosts",
    "journal": "journal",
    "merged": "journal",
    "search": "journal",
    "pause": "journal",
    "resume": "journal",
    "filter": "journal",
    "all": "journal",
    "yank": "journal",
    "save": "journal",
    "flags": "flags",
    "history": "flags",
    "rollback": "flags",
    "snapshot": "snapshot",
    "alerts": "view",
    "audit": "view",
    "help": "app",
    "quit": "app",
}


TITLES = {
    "quit": "app: quit (the hosts keep running)",
    "help": "app: keys",
    "flags-edit": "flags: edit the selected host's flags",
    "history-view": "flags: history of the selected host's configurations",
    "rollback": "flags: roll back the selected host to its previous good configuration",
    "snapshot-host": "snapshot: the selected host",
    "snapshot-all": "snapshot: every host",
    "all-lines": "journal: all lines / profile patterns",
    "filter-edit": "journal: edit the filter",
    "search-journal": "journal: search",
    "search-next": "journal: older match",
    "search-previous": "journal: newer match",
    "merged-journal": "journal: merged all-hosts view / one host",
    "pause-tail": "journal: pause / resume",
    "resume-tail": "journal: resume the tail",
    "yank-view": "journal: copy the visible lines",
    "yank-line": "journal: copy the current line",
    "save-view": "journal: save the view to a file",
    "alerts-list": "view: crash alerts",
    "audit-log": "view: audit log of remote actions",
    "stats-toggle": "view: show / hide the stats panel",
    "next-host": "host: next host",
    "hosts-group": "hosts: group by inventory group / one list",
    "hosts-sort": "hosts: sort by the next column",
    "hosts-sort-reverse": "hosts: reverse the sort",
    "hosts-filter": "hosts: filter by name, state or group",
}
"""Palette titles that read better than the footer's short descriptions."""


@dataclass(frozen=True)
class PaletteCommand:
    title: str
    help: str
    action: str


def namespace(binding_id: str) -> str:
    return NAMESPACES.get(binding_id.split("-", 1)[0], "app")


def palette_commands(bindings: Iterable[Binding], hosts: Iterable[str]) -> list[PaletteCommand]:
    commands: dict[str, PaletteCommand] = {}
    for b in bindings:
        if not b.description or not b.id or b.id.startswith("host-"):
            continue
        if b.id.endswith(("-hide", "-close")):
            continue
        title = TITLES.get(b.id) or f"{namespace(b.id)}: {b.description.lower()}"
        keys = b.key_display or b.key
        commands.setdefault(title, PaletteCommand(title, f"key: {keys}", b.action))
    for index, host in enumerate(hosts, start=1):
        title = f"host: select {host}"
        key = f"key: {index}" if index <= 9 else "tab to it"
        commands[title] = PaletteCommand(title, key, f"select_index({index})")
    return sorted(commands.values(), key=lambda c: c.title)
