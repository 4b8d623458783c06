"""Findings from the evidence: bench matrices with speedups, configurations compared, REPORT.md.

- `bench.py`, `bench_matrix.py`: bench result files read by content (bench_serving,
  bench_one_batch_server, context × concurrency sweeps, crashed runs), speedups;
- `json_members.py`: the objects of a file too large to decode whole, without huge members;
- `bench_files.py`: which package files are bench results, and their configuration;
- `bench_view.py`: their matrices, bar chart, CSV and JSON;
- `host_bench.py`: the selected host's bench files as they are on the host now;
- `compare.py`, `compare_view.py`: configurations side by side from the ledger;
- `report.py`: the findings report (REPORT.md) from a package's evidence;
- `snapshot_crashes.py`: the crashes a snapshot's excerpt shows, each with the run that had it;
- `campaign_report.py`: its section on tuning campaigns (grid, best stable cell, crash boundary);
- `rollout_report.py`: its section on group rollouts (one change to many hosts, read as one).

Who may import it: the CLI, the app and widgets. It imports `package`, `ledger`, `watch`,
`local` and `transport`; never `tuning` or the fleet.
"""
