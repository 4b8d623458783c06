"""How a change ended, for people: what `set`, `rollback`, a group's hosts and `watch`'s
probation rollback print once the one path of a change (console/tuning/change.py) returns."""

from __future__ import annotations

from rich.markup import escape

from console.cli.common import err, out
from console.hosts.events import ChangeAction, RolloutFinished, RolloutOutcome
from console.service.flags import format_value
from console.tuning.change import ChangeOutcome
from console.watch.gpus import fullest_text

EXCERPT_SHOWN = 25
"""Lines of the failed invocation's journal printed (the history keeps more)."""


def say(text: str) -> None:
    out.print(text, soft_wrap=True)


def report(outcome: ChangeOutcome) -> None:
    """How a change ended, for people (`set`, `rollback`, `watch`'s probation rollback)."""
    result = outcome.result
    name = result.host
    for note in result.abandoned:
        err.print(
            f"[yellow]{name}: {escape(note)}[/yellow]; `specops history {name}` shows it",
            soft_wrap=True,
        )
    for warning in result.warnings:
        err.print(f"  [yellow]![/yellow] {name} at start-up: {escape(warning)}", soft_wrap=True)
    _report_result(result, outcome.intent)
    if outcome.experiment is not None:
        say(f"experiment recorded on the host: {escape(outcome.experiment)}")
    elif not result.untouched:  # a change refused before it began is no experiment
        err.print(
            f"specops: {name}: experiment not recorded on the host: {outcome.not_recorded}",
            markup=False,
            soft_wrap=True,
        )


def probation_note(hosts: list[str], probation_s: float, action: ChangeAction) -> None:
    """After kept changes: they are on probation, and only a running watch or TUI acts on a
    crash in that window (nothing on the host does). A rollback is not on probation (the
    operator chose where to go back to: nothing to undo), so it says nothing."""
    if not hosts or probation_s <= 0 or action is ChangeAction.ROLLBACK:
        return
    span = f"{probation_s / 60:g} min" if probation_s >= 60 else f"{probation_s:g}s"
    say(
        f"[dim]{escape(', '.join(hosts))}: on probation for {span}: a crash in that time is "
        "rolled back only while `specops watch` or the TUI runs[/dim]"
    )


def _report_result(result: RolloutFinished, intent: str) -> None:
    name = result.host
    if result.outcome is RolloutOutcome.APPLIED:
        accept = f", accept len {result.accept_len:.2f}" if result.accept_len is not None else ""
        soaked = f", stayed up {result.soaked_s:g}s" if result.soaked_s else ""
        say(
            f"[green]{name}: applied[/green] {escape(intent)}; healthy "
            f"(invocation {result.invocation_id[:12]}){accept}{soaked}"
        )
        return
    if result.excerpt:
        err.print(f"journal of the failed invocation {result.failed_invocation or '?'}:")
        for line in result.excerpt[-EXCERPT_SHOWN:]:
            err.print(f"  {line}", markup=False, highlight=False, soft_wrap=True)
    for xid in result.xids:  # the driver's side of the crash
        say(f"[red]{name}: {escape(xid)}[/red]")
    if (memory := fullest_text(result.gpus_at_ready)) is not None:
        say(f"{name}: GPU memory with the new setting at ready: {memory}")
    values = " ".join(f"{k}={format_value(v)}" for k, v in result.flags.items())
    if result.outcome is RolloutOutcome.ROLLED_BACK:
        say(
            f"[yellow]{name}: rolled back[/yellow]: {escape(result.reason)}\n"
            f"{name}: back on {escape(values)}; healthy (invocation {result.invocation_id[:12]})"
        )
        return
    say(f"[red]{name}: FAILED[/red]: {escape(result.reason)}")
    if result.rollback_error:
        style = "bold red" if result.unreachable else ""
        text = f"{name}: {escape(result.rollback_error)}"
        say(f"[{style}]{text}[/{style}]" if style else text)
    if result.failed_invocation:
        say(f"back to the last good configuration: specops rollback {name}")
