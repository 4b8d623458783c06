"""The app shell's pieces: what `SpecopsApp` (console/app.py) is composed of.

With console/app.py and `widgets/`, the only code that imports Textual; nothing in the
domain imports this package. Each module holds one concern of the app as a typed mixin on
`Shell` (shell.py), so `SpecopsApp` reads as the list of what the app does:

- `engine.py`: the engine's own event loop, on a thread of its own (sessions, followers,
  polls, rollouts, snapshots), so a key never waits behind a batch of journal lines; it
  imports no Textual, and only the app owns one;
- `engine_bridge.py`: engine-thread events into the app (messages, the journal inbox, keys first);
- `monitoring.py`: live numbers into the fleet table, accept-length chart and stats panel;
- `fleet_table.py`: the fleet table's selection, grouping, sorting and filter;
- `journal_keys.py`: the journal view's keys (filters, search, pause, copy, save);
- `alerts.py`: crash alerts, changes that did not finish, the audit log;
- `evidence_actions.py`: snapshot, bench results, compare, report;
- `rollout_actions.py`: flag editor, rollback, rollout, probation;
- `group_actions.py`: marks (`space`, `M`) and the flag editor over the marked hosts: a group
  rollout, canary then waves, on its screen;
- `campaign_actions.py`: `C`: a tuning campaign's setup, its run on the engine, its screen;
- `help_palette.py`: the help screen and the command palette;
- `shell.py`: `Shell`, the state and helpers the mixins share.
"""
