"""The operator's own machine: settings, the audit log, and how files are written there.

- `settings.py`: the user's settings file (config dir, state dir, connect budget, idle close);
- `audit.py`: the audit log, every remote command and every action, one JSON line each;
- `redaction.py`: secrets out of everything specops writes (commands, free text, drop-ins);
- `files.py`: writing a file whole or not at all (temp name, fsync, rename).

Who may import it: everything above the transport. It imports `hosts` and, for the command
record the audit log stores, `transport.ssh`.
"""
