"""The reproduction package: snapshot a host's evidence, with a manifest `sha256sum -c` checks.

- `snapshot.py`: one snapshot across hosts, with progress events;
- `package.py`: where each file goes in the package and what a variant is called;
- `transfer.py`: SFTP into `.part`, hash while downloading, publish without overwriting;
- `digests.py`: hashes computed on the host (openssl, sha256sum);
- `manifest.py`: `MANIFEST.sha256`, byte-sorted, and `verify`;
- `excerpt.py`: the filtered journal excerpt.
- `bench.py`, `bench_matrix.py`: bench result files read by content (bench_serving,
  bench_one_batch_server, context × concurrency sweeps, crashed runs), speedups;
  `bench_files.py`: which files, and their configuration from the package;
  `bench_view.py`: their matrices, bar chart, CSV and JSON;
- `ledger.py`: the experiment ledger (one record per flag change, with metric windows);
  `compare.py`, `compare_view.py`: configurations side by side from it;
- `report.py`: the findings report (REPORT.md) from a package's evidence.

Who may import it: the CLI, the app, widgets and the simulator (for the manifest format).
It imports `service`, `watch`, `events`, `transport`, `settings` and `files`; never `tuning`
or the fleet (the ledger takes a change by its shape, not tuning's Plan).
"""
