"""The reproduction package: a host's evidence copied whole, with a manifest `sha256sum -c` checks.

- `snapshot.py`: one snapshot across hosts, with progress events;
- `layout.py`: where each file goes in the package and what a variant is called;
- `names.py`: host file names in the package: kept, renamed or refused;
- `bench_globs.py`: which host files a profile's bench globs collect;
- `transfer.py`: SFTP into `.part`, hash while downloading, publish without overwriting;
- `digests.py`: hashes computed on the host (openssl, sha256sum);
- `manifest.py`: `MANIFEST.sha256`, byte-sorted, and `verify`;
- `excerpt.py`: the filtered journal excerpt, never a crash cut short;
- `gpus_file.py`: `gpus.json`: the GPUs at the snapshot and the Xid errors of the last minutes.

Who may import it: `findings`, the simulator (for the manifest format), the CLI, the app
and widgets. It imports `ledger`, `service`, `watch`, `local`, `transport` and `hosts`.
"""
