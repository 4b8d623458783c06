"""The TUI's widgets: one screen or panel per module, Textual only, no SSH.

- `accept_chart.py`: acceptance length over time, one sparkline per host, so hosts compare at a
  glance;
- `alerts.py`: `A`: every crash seen since the console started, and changes that did not
  finish;
- `audit_view.py`: `L`: the remote actions specops took (the audit log), newest last;
- `bench_view.py`: `b`: the bench results in the selected host's package, as `specops bench`
  shows them;
- `campaign_setup.py`: `C`: a campaign's grid, windows and end state, checked, then its plan
  to confirm;
- `campaign_view.py`: a campaign as it runs: the grid filling in, progress and time left, the
  current cell's phase, `x` to stop after it;
- `commands.py`: the command palette's entries: every bound action, namespaced, plus one per
  host;
- `compare_view.py`: `c`: the selected host's configurations side by side, from its experiment
  ledger;
- `dialog.py`: the dialogs' base: a modal screen on an opaque background, so the live widgets
  behind it cost nothing to draw while it is open;
- `flag_editor.py`: `f`: the selected host's flags — current values, edit, review the diff,
  confirm;
- `fleet_rows.py`: what the fleet table knows of each host, and the order it shows them in;
- `gpu_view.py`: `u`: the selected host's GPUs, each with its memory and utilization history;
- `group_rollout_view.py`: one change to the marked hosts as it happens: a row per host, the
  waves above;
- `help_screen.py`: `?`: every key binding that is live on the screen it was opened from, with
  its id;
- `history_view.py`: `h`: the selected host's history, newest first, and rollbacks to any entry
  of it;
- `host_table.py`: the fleet table: one row per host with its connection, unit and flag state;
- `journal_view.py`: the live journal: one host or all hosts merged, filtered, pausable,
  searchable;
- `line_log.py`: a Textual `Log` that measures the lines it is given as it writes them;
- `messages.py`: textual messages carrying the engine's domain events into the widget tree;
- `ordered_input.py`: a text field whose editing keys apply in the order typed (a burst from
  tmux);
- `probation_banner.py`: the probation banner: which hosts are on probation, and a probation
  rollback's countdown;
- `rollback_confirm.py`: a rollback's diff and its confirmation: the flag editor's review step,
  for a rollback;
- `rollout_view.py`: a flag change as it happens: each step on the left, the new invocation's
  journal beside it;
- `snapshot_panel.py`: the snapshot panel: each host's progress while `s`/`S` runs, then what
  the package gained;
- `stats_panel.py`: the selected host's numbers over 1 and 10 min, this run, the last, these
  flags;
- `table_keys.py`: cursor keys that stay in order with a screen's priority `enter` (a burst of
  keys from tmux);

They show what the domain reports (events, monitors, records) and post messages back to the
app; they never open a session or write a file themselves.
"""
