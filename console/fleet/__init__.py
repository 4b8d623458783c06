"""All hosts together: one session, follower and status poll per host, and which are open.

- `fleet.py`: `Fleet`, every host's tasks and one stream of events for the TUI and `watch`;
- `demand.py`: on-demand connections, a host open only while something wants it;
- `filter.py`: the fleet table's filter (`name~b300 state=down group=pro6000`).

Who may import it: the CLI, the app and widgets. It imports `hosts`, `local`, `service`,
`watch` and `transport`; never `tuning` or the evidence rooms.
"""
