"""The reproduction package: snapshot a host's evidence, with a manifest `sha256sum -c` checks.

- `snapshot.py`: one snapshot across hosts, with progress events;
- `package.py`: where each file goes in the package and what a variant is called;
- `transfer.py`: SFTP into `.part`, hash while downloading, publish without overwriting;
- `digests.py`: hashes computed on the host (openssl, sha256sum);
- `manifest.py`: `MANIFEST.sha256`, byte-sorted, and `verify`;
- `excerpt.py`: the filtered journal excerpt.

Who may import it: the CLI, the app, widgets and the simulator (for the manifest format).
It imports `service`, `watch`, `events` and `transport`; never `tuning` or the fleet.
"""
