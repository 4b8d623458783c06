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

import warnings

from cryptography.utils import CryptographyDeprecationWarning

# asyncssh (2.x) names cryptography's DSA key classes when it is imported, and cryptography
# (43+) warns that DSA is deprecated: ten lines on stderr before any command's output. Only
# that warning from asyncssh's own crypto modules is silenced; any other still shows.
warnings.filterwarnings(
    "ignore",
    message=r"DSA is deprecated",
    category=CryptographyDeprecationWarning,
    module=r"asyncssh\.crypto\.",
)
