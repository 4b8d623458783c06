"""The simulated fleet: SSH servers in this process that behave like GPU hosts running SGLang.

- `dcgm.py`: a simulated host's dcgm-exporter page (the GPUs for a Prometheus to scrape);
- `failures.py`: when a simulated server dies: the real incident timeline, with timings tests
  can shrink;
- `fleet.py`: a simulated GPU fleet: N simulated hosts plus the profiles, key and known_hosts
  to reach them;
- `gpus.py`: a simulated host's `nvidia-smi --query-gpu`, in the real H100's shape, following
  its server (idle, loading, serving: the static pool, load, the power cap when heavy);
- `host.py`: one simulated GPU host: an in-process asyncssh server with journald, systemd,
  files, SGLang;
- `http.py`: a minimal HTTP/1.x server loop for the simulated SGLang (stdlib only);
- `journal.py`: a simulated journald for one host, with real cursor semantics;
- `load.py`: synthetic journal load for benchmarks and tests: numbered SGLang decode lines at a
  rate;
- `loopback.py`: a simulated host's SGLang port on 127.0.0.1, for a scraper not on the host;
- `metrics_page.py`: the simulated SGLang's `/metrics` page, as SGLang 0.5.23 serves it with
  `--enable-metrics`;
- `releases.py`: what changes in the simulated SGLang from one release to the next: flags,
  `--help`, lines;
- `sglang.py`: a simulated SGLang DDTree server: log lines in the real formats, behaviour by
  its flags;
- `sglang_process.py`: the simulated SGLang as a real process: what the testbed hosts' systemd
  unit runs;
- `shell.py`: the simulated host's `sh`: it runs exactly the scripts in specops' remote
  vocabulary;
- `systemd.py`: a simulated systemd for one service on one simulated host;

Used by `specops demo`, the tests and the benchmarks; nothing in the product imports it.
"""
