"""The journal view's keys: all lines or patterns, merged, pause and resume, the filter and
the search prompts, and copying or saving what the view shows (`a m p G e / n N y Y w`)."""

from __future__ import annotations

from datetime import datetime

from textual import on
from textual.widgets import Input

from console.local.files import write_atomic
from console.local.settings import state_dir
from console.ui.shell import Shell
from widgets.journal_view import JournalView, PromptInput


class JournalKeys(Shell):
    """Each key acts on the main screen's journal view, also with a modal on top."""

    def action_toggle_all_lines(self) -> None:
        if view := self.main(JournalView):
            view.toggle_all()

    def action_toggle_merged(self) -> None:
        if view := self.main(JournalView):
            view.toggle_merged()

    def action_toggle_pause(self) -> None:
        if view := self.main(JournalView):
            view.toggle_pause()

    def action_resume_tail(self) -> None:
        if view := self.main(JournalView):
            view.resume()

    def action_edit_filter(self) -> None:
        view, prompt = self.main(JournalView), self.main(PromptInput, "#filter")
        if view is not None and prompt is not None and self.screen is self.screen_stack[0]:
            prompt.open(view.filter_text)

    def action_search(self) -> None:
        view, prompt = self.main(JournalView), self.main(PromptInput, "#search")
        if view is not None and prompt is not None and self.screen is self.screen_stack[0]:
            prompt.open()  # empty: enter ends the search; `n`/`N` repeat the current one

    def action_search_next(self, older: bool) -> None:
        if view := self.main(JournalView):
            view.search_next(older)

    @on(Input.Submitted, "#filter")
    def _filter_submitted(self, message: Input.Submitted) -> None:
        view, prompt = self.main(JournalView), self.main(PromptInput, "#filter")
        if view is None or prompt is None:
            return
        try:
            view.set_custom_filter(message.value)
        except ValueError as exc:
            self.notify(str(exc), title="filter", severity="error", markup=False)
            return
        prompt.action_close()

    @on(Input.Submitted, "#search")
    def _search_submitted(self, message: Input.Submitted) -> None:
        view, prompt = self.main(JournalView), self.main(PromptInput, "#search")
        if view is not None and prompt is not None:
            view.search(message.value)
            prompt.action_close()

    def action_yank_view(self) -> None:
        if view := self.main(JournalView):
            text = view.visible_text()
            self.copy_to_clipboard(text)  # OSC 52: reaches the local clipboard over SSH
            self.notify(f"copied {text.count(chr(10)) + bool(text)} lines", title="clipboard")

    def action_yank_line(self) -> None:
        view = self.main(JournalView)
        line = view.current_line() if view is not None else None
        if line is not None:
            self.copy_to_clipboard(line)
            self.notify(line[:120], title="copied line", markup=False)

    def action_save_view(self) -> None:
        view = self.main(JournalView)
        if view is None:
            return
        stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
        path = state_dir() / "saved" / f"{view.view_name}-{stamp}.log"
        try:
            write_atomic(path, "\n".join(view.lines) + "\n")
        except OSError as exc:
            self.notify(f"{path}: {exc.strerror}", title="save failed", severity="error")
            return
        self.notify(str(path), title=f"saved {len(view.lines)} lines", markup=False)
