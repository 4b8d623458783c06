"""Changing a flag safely: plan the change, roll it out, keep it or roll it back.

- `change.py`: the one path of every change (set, rollback, probation's rollback, a
  campaign's cells): the rollout, then the audit action and the ledger record, one outcome;
- `campaign.py`: a tuning campaign's grid, which cells a crash makes pointless, the estimate;
- `sweep.py`: running a campaign: the baseline, each cell a change then a measurement
  window, the host back to its end state;
- `campaign_start.py`: a new campaign made from what the host runs, its host checked free of
  another console's campaign, and one cell's estimated time (for the CLI and the TUI);
- `bench_step.py`: a campaign's `--bench CMD`, run on the host after each window and read
  back through the bench reader;
- `group.py`: one change to many hosts: a canary, then waves, stopping at the first failure;
- `group_plan.py`: the plan of a change to many hosts, refused or split in waves before any
  host is touched;
- `plan.py`: the diff of a change, validated before anything touches a host;
- `rollout.py`: apply → restart → new invocation → ready → health → smoke → soak → keep or
  roll back (to the last soaked configuration, else the unit's original);
- `steps.py`: the steps a rollout (and its rollback) is made of;
- `soak.py`: the soak window and how a failure's stage is named;
- `gpu_evidence.py`: what the GPUs said around a failed change (at ready, right after the
  crash) and the driver's Xid errors near it;
- `history.py`: the host's own history of configurations, and its last good one;
- `rollback.py`: where a rollback goes (last good, entry N, the original), as a plan;
- `left_on.py`: which configuration a change that did not end left the host on;
- `invocation.py`: watching one invocation of the unit in its journal;
- `smoke.py`: the end-to-end completion check;
- `flag_history.py`: per flag, its last good value and the values it crashed with;
- `probation.py`: a crash soon after a kept change, rolled back after a countdown (through
  `change.py`, on the loop that owns the sessions);
- `history_rows.py`: a host's history as the TUI's history view shows it: one row per entry,
  newest first.

Who may import it: the CLI, the app and widgets (for the types they show). It imports
`service`, `watch`, `ledger`, `local`, `hosts`, `transport` and `findings` (the bench
reader, for a campaign's `--bench`); never `package` or the fleet.
"""
