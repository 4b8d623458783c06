"""The systemd unit: how a service's command line is read, changed and reported.

- `execline.py`: systemd's word syntax for ExecStart= (quoting, escapes, `%`, `$`);
- `unit.py`: the effective unit from `systemctl cat` (file + drop-ins) and specops' drop-in;
- `flags.py`: a profile's flag values: read, validate, apply, diff, name a variant;
- `status.py`: `read_status`, systemd's view of the unit plus its current flag values;
- `running.py`: `read_running`, the main process's own argv and environment (/proc);
- `health.py`: `probe_health`, the server's `/health` answer in one word.
- `catalogue.py`: SGLang's launch flags per release, and what a profile's argument means on a
  given release;
- `release_flags.py`: a profile's flags as the host's SGLang release takes them;
- `version.py`: which SGLang release a unit runs, asked of the unit's own interpreter;
- `gpu_model.py`: which GPUs a host has (`8× NVIDIA H100 80GB HBM3`), asked of nvidia-smi;

Who may import it: `ledger`, `package`, `tuning`, the fleet, the simulator, the CLI, the app
and widgets. It imports `hosts` and `transport` (for `read_status`) only.
"""
