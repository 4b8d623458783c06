"""How specops reaches a host: the SSH session, the fixed vocabulary of remote commands, HTTP.

- `ssh.py`: `HostSession`, one supervised asyncssh connection per host (strict host keys,
  keepalives, capped jittered backoff, `Disconnected` rather than `returncode None`);
- `remote.py`: every command specops runs on a host, built with `shlex.join`;
- `http.py`: HTTP/1.1 to the server's port through the SSH connection (no port forward).

Who may import it: everything above it (`events`, `audit`, the rooms, the fleet, the CLI).
It imports only `console.profiles` and `console.settings`.
"""
