"""The experiment ledger: every flag change, with the numbers before and after it.

- `ledger.py`: one record per change (what changed, how it ended, the metric windows of the
  invocations before and after), kept on the host beside its history and read back by
  `compare`, the report and the snapshot;
- `campaigns.py`: a tuning campaign's record on the host (its cells and their outcomes), the
  host's lock while one runs.

Who may import it: `tuning` (the one path of a change records it), `package`, `findings`,
the CLI, the app and widgets. It imports `hosts`, `local`, `service`, `watch` and `transport`.
"""
