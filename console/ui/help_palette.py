"""Every key, found two ways: the help screen (`?`, the live bindings with their ids) and the
command palette (`ctrl+p`, every action namespaced `host: …`, `journal: …`, …)."""

from __future__ import annotations

from collections.abc import Iterable

from textual.app import SystemCommand
from textual.binding import Binding
from textual.screen import Screen

from console.ui.shell import Shell
from widgets.commands import palette_commands
from widgets.help_screen import HelpScreen


class HelpPalette(Shell):
    """Both lists are built from `BINDINGS`, so a new binding appears in each by itself."""

    def action_help(self) -> None:
        if len(self.screen_stack) == 1:
            live = [active.binding for active in self.screen.active_bindings.values()]
            keys = _with_app_bindings(live, _bindings(self.BINDINGS))
            hosts = {f"select_index({i})" for i in range(1, len(self.host_names) + 1)}
            keys = [b for b in keys if not b.action.startswith("select_index") or b.action in hosts]
            self.push_screen(HelpScreen(keys))

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:  # type: ignore[type-arg]
        yield from super().get_system_commands(screen)
        for command in palette_commands(_bindings(self.BINDINGS), self.host_names):
            action = command.action
            yield SystemCommand(command.title, command.help, lambda a=action: self._palette(a))

    async def _palette(self, action: str) -> None:
        await self.run_action(action)


def _with_app_bindings(live: list[Binding], app: Iterable[Binding]) -> list[Binding]:
    """The screen's live bindings first, then app bindings that are shadowed or hidden."""
    seen = {(b.action, b.description) for b in live}
    return live + [b for b in app if (b.action, b.description) not in seen]


def _bindings(declared: Iterable[Binding | tuple[str, ...]]) -> list[Binding]:
    return [b for b in declared if isinstance(b, Binding)]
