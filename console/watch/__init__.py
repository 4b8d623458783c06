"""What hosts say: the journal follower, SGLang's lines, crash signatures and live numbers.

- `journal.py`: the cursor follower (`journalctl -o json -f --after-cursor`), nothing lost
  or doubled across reconnects;
- `sglang.py`: SGLang's log lines (decode, prefill, load, capture, ready, init), read by
  `header.py` (prefixes, ranks, colour), `batches.py` (decode/prefill) and `startup.py`;
- `signatures.py`: crash signatures and a profile's own `[[metrics]]` patterns;
- `metrics.py`: bounded per-host series and windowed statistics;
- `monitor.py`: `HostMonitor`, what one host's journal means right now.

Who may import it: `state`, `tuning`, `evidence`, the fleet, the CLI, the app and widgets.
It imports `profiles`, `events` and `transport` only.
"""
