"""How specops reaches a host: the SSH session, the fixed vocabulary of remote commands, HTTP.

- `ssh.py`: `HostSession`, one supervised asyncssh connection per host (strict host keys,
  keepalives, capped jittered backoff, `Disconnected` rather than `returncode None`);
- `remote.py`: every command specops runs on a host, built with `shlex.join`;
- `http.py`: HTTP/1.1 to the server's port through the SSH connection (no port forward).
- `host_files.py`: what specops keeps on a host, under `/var/lib/specops/UNIT/`, and how it
  gets there;
- `prometheus.py`: prometheus's HTTP API (`/api/v1/query_range`), reached directly or through a
  host's SSH connection;

Who may import it: every room but `hosts`. It imports only `hosts` (profiles, and the
connection states it reports).
"""
