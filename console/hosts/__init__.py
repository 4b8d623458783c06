"""What specops knows of a host before it connects, and the events it reports about one.

- `profiles.py`: one TOML profile per host, validated into frozen pydantic models;
- `inventory.py`: hosts from an Ansible inventory, with template profiles;
- `events.py`: the domain events (connection state, journal, status, crash, rollout,
  snapshot) the engine emits and the CLI and TUI show;
- `clock.py`: the one clock time-dependent behaviour reads, so tests can advance it;
- `tasks.py`: stopping a task without swallowing the caller's own cancellation.

The bottom room: everything may import it, and it imports nothing of specops.
"""
