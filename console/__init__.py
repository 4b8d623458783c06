"""specops: the product's core in rooms by concern, and its app shell.

- `app.py` (with `app.tcss`): the Textual App shell, composed of `ui/` and `widgets/`;
- `__main__.py`: `python -m console`, the same as the `specops` command (`cli/`).

The rooms, from the command line down to the wire: `cli/` (the commands), `sim/` (the
simulated fleet), `ui/` (the app's pieces), `fleet/` (all hosts together), `tuning/` (changing
a flag safely), `findings/` (reports from the evidence), `package/` (the reproduction package),
`ledger/` (the experiments), `service/` (the systemd unit), `watch/` (what hosts say),
`local/` (the operator's machine), `transport/` (SSH, remote commands, HTTP) and `hosts/`
(profiles, inventories, events). pyproject.toml's import-linter contracts say which room may
import which.
"""
