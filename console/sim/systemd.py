"""A simulated systemd for one service on one simulated host.

Unit files and drop-ins are real files under the host's root directory. `daemon-reload`
loads them (until then `NeedDaemonReload=yes`), `restart` starts a new invocation of the
simulated SGLang from the loaded ExecStart/Environment, and `Restart=on-failure` with start
limits behaves like systemd: a crashing server is restarted (NRestarts rises) until the
start limit is hit and the unit is `failed`. systemd's own lines go to the unit's journal.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from console.service.unit import effective_service
from console.sim.gpus import xid_line
from console.sim.journal import SimJournal
from console.sim.sglang import SimSGLang, Timing
from console.transport import remote

log = logging.getLogger(__name__)

Factory = Callable[[list[str], dict[str, str], Callable[[str, int], None]], SimSGLang]


@dataclass
class Loaded:
    files: dict[str, str]
    argv: list[str]
    env: dict[str, str]
    restart_on_failure: bool
    restart_sec: float


class SimUnit:
    def __init__(
        self,
        name: str,
        root: Path,
        journal: SimJournal,
        *,
        timing: Timing,
        bench_dir: Path | None,
        version: str | None = None,
    ) -> None:
        self.version = version
        """`sglang.__version__` of the installed build (None: the simulator's default)."""
        self.name = name
        self.root = root
        self.journal = journal
        self.timing = timing
        self.bench_dir = bench_dir
        self.loaded: Loaded | None = None
        self.active_state = "inactive"
        self.sub_state = "dead"
        self.result = "success"
        self.invocation_id = ""
        self.n_restarts = 0
        self.main_pid = 0
        self.running: tuple[list[str], dict[str, str]] | None = None
        """The main process's argv and environment (what /proc/PID/cmdline, environ say)."""
        self.exec_main_status = 0
        self.exec_main_code = 0
        self.server: SimSGLang | None = None
        self._task: asyncio.Task[None] | None = None
        self._starts: list[float] = []
        self._next_pid = 4000
        self.xids: dict[int, int] = {}
        """The last Xid code each GPU logged (dcgm-exporter's `DCGM_FI_DEV_XID_ERRORS`)."""
        self.gpus: Callable[[], int] = lambda: 0
        """How many GPUs the host has (its nvidia-smi's): with any, an illegal memory access
        leaves the driver's Xid in the kernel's log, on GPU 0 (TP rank 0's)."""

    # --- files ---------------------------------------------------------------------------

    @property
    def fragment(self) -> str:
        return f"/etc/systemd/system/{self.name}"

    @property
    def dropin_dir(self) -> str:
        return f"/etc/systemd/system/{self.name}.d"

    def local(self, path: str) -> Path:
        return self.root / path.lstrip("/")

    def files_on_disk(self) -> dict[str, str]:
        files: dict[str, str] = {}
        frag = self.local(self.fragment)
        if frag.exists():
            files[self.fragment] = frag.read_text()
        ddir = self.local(self.dropin_dir)
        if ddir.is_dir():
            for conf in sorted(ddir.glob("*.conf")):
                files[f"{self.dropin_dir}/{conf.name}"] = conf.read_text()
        return files

    def cat(self) -> str:
        parts = [
            f"# {path}\n{text.rstrip(chr(10))}\n" for path, text in self.files_on_disk().items()
        ]
        return "\n".join(parts)

    def need_daemon_reload(self) -> bool:
        return self.loaded is None or self.loaded.files != self.files_on_disk()

    def daemon_reload(self) -> None:
        files = self.files_on_disk()
        service = effective_service(self.cat())
        text = "\n".join(files.values())
        restart = re.findall(r"^\s*Restart=(\S+)", text, re.M)
        restart_sec = re.findall(r"^\s*RestartSec=([\d.]+)", text, re.M)
        env = dict(service.environment)
        self.loaded = Loaded(
            files,
            [_expand(word, env) for word in service.argv],
            env,
            bool(restart) and restart[-1] in ("on-failure", "always"),
            float(restart_sec[-1]) if restart_sec else 0.1,
        )

    # --- state -------------------------------------------------------------------------

    def show(self) -> dict[str, str]:
        drop_ins = [p for p in self.files_on_disk() if p != self.fragment]
        return {
            "Id": self.name,
            "ActiveState": self.active_state,
            "SubState": self.sub_state,
            "Result": self.result,
            "InvocationID": self.invocation_id,
            "NRestarts": str(self.n_restarts),
            "MainPID": str(self.main_pid),
            "NeedDaemonReload": "yes" if self.need_daemon_reload() else "no",
            "FragmentPath": self.fragment,
            "DropInPaths": " ".join(drop_ins),
            "ExecMainStatus": str(self.exec_main_status),
            "ExecMainCode": str(self.exec_main_code),
        }

    def _system_log(self, message: str, priority: int = 6, **fields: str) -> None:
        self.journal.append(
            self.name,
            message,
            PRIORITY=str(priority),
            _PID="1",
            SYSLOG_IDENTIFIER="systemd",
            INVOCATION_ID=self.invocation_id,
            **fields,
        )

    # --- control -----------------------------------------------------------------------

    async def restart(self) -> None:
        await self.stop()
        self.n_restarts = 0
        self._start()

    async def stop(self) -> None:
        if self._task is not None and not self._task.done():
            self._system_log(f"Stopping {self.name}...")
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._system_log(f"Stopped {self.name}.")
        self._task = None
        self.server = None
        self.main_pid = 0
        if self.active_state != "failed":
            self.active_state, self.sub_state = "inactive", "dead"

    def reset_failed(self) -> None:
        self._starts.clear()
        self.n_restarts = 0
        if self.active_state == "failed":
            self.active_state, self.sub_state, self.result = "inactive", "dead", "success"

    def _start(self) -> None:
        if self.loaded is None:
            self.daemon_reload()
        assert self.loaded is not None
        now = time.monotonic()
        self._starts = [t for t in self._starts if now - t < 10.0] + [now]
        if len(self._starts) > 5:
            self.active_state, self.sub_state, self.result = "failed", "failed", "start-limit-hit"
            self._system_log(f"{self.name}: Start request repeated too quickly.", 3)
            self._system_log(f"{self.name}: Failed with result 'start-limit-hit'.", 3)
            self._system_log(f"Failed to start {self.name}.", 3)
            return
        self.invocation_id = uuid.uuid4().hex
        self._next_pid += 7
        self.main_pid = self._next_pid
        self.running = (list(self.loaded.argv), dict(self.loaded.env))
        self.active_state, self.sub_state, self.result = "active", "running", "success"
        # systemd 252's catalog ids (MESSAGE_ID) for a finished start job and a scheduled restart
        self._system_log(f"Started {self.name}.", MESSAGE_ID=remote.UNIT_STARTED)
        pid = str(self.main_pid)
        invocation = self.invocation_id

        def emit(message: str, priority: int) -> None:
            self.journal.append(
                self.name,
                message,
                PRIORITY=str(priority),
                _PID=pid,
                SYSLOG_IDENTIFIER="python3",
                _SYSTEMD_INVOCATION_ID=invocation,
            )

        self.server = SimSGLang(
            self.loaded.argv,
            self.loaded.env,
            emit,
            timing=self.timing,
            bench_dir=self.bench_dir,
            version=self.version,
            on_fault=lambda: self._xid(int(pid)),
        )
        self._task = asyncio.create_task(self._supervise(self.server))

    def _xid(self, pid: int) -> None:
        if self.gpus():
            self.journal.kernel(xid_line(0, pid))
            self.xids[0] = 31  # what dcgm-exporter reports as GPU 0's last Xid

    async def _supervise(self, server: SimSGLang) -> None:
        status = await server.run()
        self.server = None
        self.main_pid = 0
        if status < 0:
            self.exec_main_code, self.exec_main_status = 2, -status
            self._system_log(
                f"{self.name}: Main process exited, code=killed, status={-status}/KILL", 4
            )
            self.result = "signal"
        else:
            self.exec_main_code, self.exec_main_status = 1, status
            self._system_log(
                f"{self.name}: Main process exited, code=exited, status={status}/FAILURE", 4
            )
            self.result = "exit-code"
        self._system_log(f"{self.name}: Failed with result '{self.result}'.", 4)
        assert self.loaded is not None
        if not self.loaded.restart_on_failure:
            self.active_state, self.sub_state = "failed", "failed"
            return
        self.active_state, self.sub_state = "activating", "auto-restart"
        await asyncio.sleep(self.loaded.restart_sec)
        self.n_restarts += 1
        self._system_log(
            f"{self.name}: Scheduled restart job, restart counter is at {self.n_restarts}.",
            MESSAGE_ID=remote.UNIT_RESTART_SCHEDULED,
        )
        self._task = None
        self._start()

    async def shutdown(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task


def _expand(word: str, env: dict[str, str]) -> str:
    """systemd's `${VAR}` (anywhere in a word) and `$VAR` (a whole word) in ExecStart=.

    (systemd splits an unbraced `$VAR` at whitespace; the simulated units never need that.)
    """
    whole = re.fullmatch(r"\$(\w+)", word)
    if whole is not None:
        return env.get(whole.group(1), "")
    return re.sub(r"\$\{(\w+)\}", lambda m: env.get(m.group(1), ""), word)
