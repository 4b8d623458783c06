"""An `Input` whose editing keys apply in the order they were typed.

Textual runs a widget's key bindings (home, `ctrl+k`, `ctrl+u`, enter, …) only once the key
has bubbled back up to the app, while it inserts a printable key at once: keys that arrive
in one read — tmux's `send-keys`, a paste of keystrokes, typing over a slow SSH link — were
applied out of order (`ctrl+u 4` left the field empty: the 4 went in first, then the line was
deleted). Here the field's own bindings run in its key handler, in turn with the characters.
"""

from __future__ import annotations

import asyncio

from textual import events
from textual.binding import Binding
from textual.widgets import Input


def _own_keys() -> dict[str, str]:
    """Key → action of Input's bindings (`home,ctrl+a` gives two keys)."""
    keys: dict[str, str] = {}
    for binding in Input.BINDINGS:
        if isinstance(binding, Binding):
            for key in binding.key.split(","):
                keys[key.strip()] = binding.action
    return keys


async def drained(widget: Input) -> None:
    """Once `widget` has handled every key already forwarded to it.

    For a priority binding that ends an edit (enter in the flag editor): the App dispatches
    keys one by one, but a field handles them later, from its own queue. Awaited in the
    binding's action, the App dispatches nothing more until the keys typed before enter are
    in the field, and the keys typed after it go where the focus is then, not into the field.
    """
    done = asyncio.Event()
    if widget.call_later(done.set):
        await done.wait()


class OrderedInput(Input):
    """An Input that applies its own editing keys in order with the text typed."""

    _keys = _own_keys()

    async def _on_key(self, event: events.Key) -> None:
        action = self._keys.get(event.key)
        if action is None:
            await super()._on_key(event)
            return
        event.stop()
        event.prevent_default()
        self._restart_blink()
        await self.run_action(action)
