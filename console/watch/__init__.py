"""What hosts say: the journal follower, SGLang's lines, crash signatures and live numbers.

- `journal.py`: the cursor follower (`journalctl -o json -f --after-cursor`), nothing lost
  or doubled across reconnects;
- `sglang.py`: SGLang's log lines (decode, prefill, load, capture, ready, init), read by
  `header.py` (prefixes, ranks, colour), `batches.py` (decode/prefill) and `startup.py`;
- `signatures.py`: crash signatures and a profile's own `[[metrics]]` patterns;
- `metrics.py`: bounded per-host series and windowed statistics;
- `monitor.py`: `HostMonitor`, what one host's journal means right now.
- `health.py`: `probe_health`: one word for "does the server answer `/health`?", for the table
  and `status`;
- `phase.py`: what a start-up line says the server is doing: the phase a crash is reported in;
- `poller.py`: numbers beside the journal: `/metrics` per host or the fleet from Prometheus;
- `restarts.py`: restarts of one host's service: how many in the last minutes, and whether it
  crash-loops;
- `gpus.py`: the GPUs as `nvidia-smi --query-gpu` reports them (memory, power, clock events);
- `gpu_reader.py`: one read of a host's GPUs through its session, and the poll of the hosts on
  screen (`no GPU tool` said once);
- `dcgm.py`: the GPUs and Xids from dcgm-exporter's series in Prometheus, for the whole fleet;
- `xid.py`: the driver's Xid errors from the kernel log, with what each code means;
- `xid_reader.py`: a host's Xid errors read from its kernel log (`journalctl --dmesg`), each
  on the GPU at its PCI address, and whether it is near a crash;
- `unit_starts.py`: systemd's records of the unit's starts before the console looked;
- `server_metrics.py`: SGLang's own numbers, read from its `/metrics` page through the host's
  SSH connection;
- `sources.py`: each host's speculative-decoding numbers from a source other than its journal;

Who may import it: `ledger`, `package`, `findings`, `tuning`, the fleet, the CLI, the app
and widgets. It imports `hosts` and `transport` only.
"""
