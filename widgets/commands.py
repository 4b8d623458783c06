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
    "snapshot": "snapshot",
    "alerts": "view",
    "audit": "view",
    "help": "app",
    "quit": "app",
}


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
        title = f"{namespace(b.id)}: {b.description.lower()}"
        keys = b.key_display or b.key
        commands.setdefault(title, PaletteCommand(title, f"key: {keys}", b.action))
    for index, host in enumerate(hosts, start=1):
        title = f"host: select {host}"
        key = f"key: {index}" if index <= 9 else "tab to it"
        commands[title] = PaletteCommand(title, key, f"select_index({index})")
    return sorted(commands.values(), key=lambda c: c.title)
