"""A fleet fed a fixed script through the real Fleet's delivery path (stable screenshots).

Pilot tests elsewhere run the app on live simulated hosts; screenshots need every number and
timestamp on screen to be the same on every run, so here the engine's own entry points
(`_state_changed`, `_remember`, `_journal_delivery`) receive fixed events instead of SSH.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from console.fleet.fleet import Fleet
from console.hosts.events import (
    CrashDetected,
    HealthChecked,
    JournalEntry,
    RolloutEvent,
    RolloutJournal,
    RolloutProgress,
    RolloutStep,
    ServiceStatus,
)
from console.hosts.profiles import Profile, load_fleet
from console.package.layout import Artifact
from console.package.snapshot import HostSnapshot, PackageResult, SnapshotReport
from console.package.transfer import Outcome
from console.sim.host import unit_file
from console.transport.ssh import ConnState, HostState
from console.tuning.history import HistoryEntry
from console.tuning.history_rows import HostHistory
from console.tuning.plan import Plan, make_plan
from console.watch.monitor import HostMonitor

REPO = Path(__file__).resolve().parents[2]

ACCEPT = {"b300": (4.31, 4.42, 4.38, 4.45, 4.36, 4.40), "pro6000": (5.61, 5.92, 6.10, 5.84)}
TPS = {"b300": 1650.0, "pro6000": 820.0}
FLAGS = {
    "b300": {
        "budget": 8,
        "topk": 4,
        "cuda_graph": True,
        "nvls": True,
        "max_running": 32,
        "window": 4096,
    },
    "pro6000": {
        "budget": 16,
        "topk": 4,
        "cuda_graph": False,
        "nvls": False,
        "max_running": 32,
        "window": 4096,
    },
}


def profiles() -> list[Profile]:
    return load_fleet(REPO / "profiles")


def decode(accept: float, tps: float, graph: bool, i: int) -> str:
    return (
        f"[2026-12-01 21:40:{10 + i:02d} TP0] Decode batch, #running-req: 32, #token: 41230, "
        f"token usage: 0.02, accept len: {accept:.2f}, accept rate: {(accept - 1) / 8:.2f}, "
        f"cuda graph: {graph}, gen throughput (token/s): {tps + i:.2f}, #queue-req: 0"
    )


class FrozenMonitor(HostMonitor):
    """A monitor whose present stands still one second after the script's last line, so the
    ages and windows on screen are the same however long a screenshot takes."""

    frozen_at = 0.0

    def now(self) -> float:
        return self.frozen_at


RELEASES = ("0.5.23", "0.5.9-ddtree")
"""The SGLang release each scripted host reports, in turn (the demo fleet mixes releases)."""


class ScriptedFleet(Fleet):
    def start(self) -> None:
        now = time.time()
        for monitor in self.monitors.values():
            frozen = FrozenMonitor(self.profiles[monitor.host])
            frozen.frozen_at = now
            self.monitors[monitor.host] = frozen
        for n, name in enumerate(self.profiles):
            invocation = f"{n + 1:x}" * 32
            self._state_changed(HostState(name, ConnState.CONNECTED, since=now))
            flags = FLAGS.get(name, FLAGS["b300"])
            self._remember(
                ServiceStatus(
                    host=name,
                    active_state="active",
                    sub_state="running",
                    invocation_id=invocation[:32],
                    flags=dict(flags),
                    sglang_version=RELEASES[n % len(RELEASES)],
                )
            )
            graph = bool(flags["cuda_graph"])
            lines = [
                "[2026-12-01 21:39:58 TP0] Initialized DDTREE draft runner. "
                f"budget={flags['budget']}, topk=4, block_size=16, draft_window_size=4096",
                "[2026-12-01 21:40:02] The server is fired up and ready to roll!",
                *(
                    decode(a, TPS.get(name, 1000.0), graph, i)
                    for i, a in enumerate(ACCEPT.get(name, (4.4,)))
                ),
            ]
            entries = [
                JournalEntry(
                    host=name,
                    cursor=f"s=x;i={i}",
                    timestamp=now - len(lines) + i,
                    message=line,
                    invocation=invocation[:32],
                    pid="4242",
                )
                for i, line in enumerate(lines)
            ]
            self._journal_delivery(name)(entries)
            self.emit(HealthChecked(name, "ok", now))

    async def stop(self) -> None:
        return None


def snapshot_report(package: Path) -> SnapshotReport:
    def artifact(path: str, size: int, outcome: Outcome) -> Artifact:
        return Artifact(path, "0" * 64, size, outcome, f"/root/{path}", f"scp b300:/root/{path} .")

    b300 = HostSnapshot(
        host="b300",
        package=package,
        artifacts=[
            artifact("bench/results_b300/ddtree_b8_graph.json", 412, Outcome.UNCHANGED),
            artifact("bench/results_b300/ddtree_b16_eager.json", 405, Outcome.NEW),
            artifact("bench/results_b300/ddtree_b8_t4_graph.3fa9c2d1.json", 431, Outcome.KEPT_BOTH),
            artifact("b300_logs/ddtree_journal_excerpt.txt", 18_204, Outcome.NEW),
            artifact("services/sglang-k26-ddtree-B300-nvlsb8t4.service", 1_002, Outcome.NEW),
        ],
    )
    return SnapshotReport(hosts=[b300], packages=[PackageResult(package, True, 12)])


UNIT = "sglang-k26-ddtree.service"


def scripted_crash(host: str = "pro6000") -> CrashDetected:
    """A crash alert with fixed text and time (a budget-16 run dying in graph capture)."""
    return CrashDetected(
        host=host,
        invocation="3" * 32,
        signature="illegal_memory_access",
        first_line="[2026-12-01 21:41:02 TP0] Scheduler hit an exception: Traceback (most recent"
        " call last):",
        line="torch.AcceleratorError: CUDA error: an illegal memory access was encountered",
        flags={"budget": 16, "topk": 4, "cuda_graph": True, "nvls": False},
        timestamp=1764625262.0,
        cursor="s=x;i=99",
    )


def scripted_plan(profile: Profile) -> Plan:
    """budget 8 → 16 with CUDA graphs off, planned against the simulated host's unit file."""
    cat = f"# /etc/systemd/system/{UNIT}\n" + unit_file(UNIT, "/opt/sglang/venv/bin/python3", 30001)
    return make_plan(profile, cat, {"budget": 16, "cuda_graph": False})


def rollout_events(host: str) -> list[RolloutEvent]:
    """A rollout half way: healthy and answering, the smoke test running."""
    steps = [
        (RolloutStep.RECORD, "ok", "unit read; drop-in zz-specops.conf"),
        (RolloutStep.WRITE, "ok", "zz-specops.conf written"),
        (RolloutStep.DAEMON_RELOAD, "ok", ""),
        (RolloutStep.VERIFY, "ok", "NeedDaemonReload=no; the effective unit is as planned"),
        (RolloutStep.RESTART, "ok", ""),
        (RolloutStep.INVOCATION, "ok", "9f3c2a71d0e8"),
        (RolloutStep.READY, "ok", "healthy after 41s"),
        (RolloutStep.SMOKE, "running", "'2+2=' must contain '4'"),
    ]
    events: list[RolloutEvent] = [
        RolloutProgress(host, step, state, detail, elapsed_s=3.0 * i)
        for i, (step, state, detail) in enumerate(steps)
    ]
    events.append(
        RolloutJournal(
            host,
            "9f3c2a71d0e8" + "0" * 20,
            (
                "[2026-12-01 21:42:10] Load weight end. type=DeepseekV3ForCausalLM, mem=21.4 GB",
                "[2026-12-01 21:42:31 TP0] Capture cuda graph end. Time elapsed: 12.4 s",
                "[2026-12-01 21:42:51] The server is fired up and ready to roll!",
            ),
        )
    )
    return events


def scripted_history(host: str = "b300") -> HostHistory:
    """A host's history with fixed times: the original, a kept change, a crash rolled back,
    an abandoned change and the rollback that followed it."""
    t0 = 1764625200.0  # 2026-12-01 21:40:00 UTC
    original = {"budget": 8, "topk": 4, "cuda_graph": True, "nvls": True}
    who = "alice@laptop"

    def entry(n: int, kind: str, outcome: str, values: dict[str, Any], **extra: Any) -> Any:
        return HistoryEntry(
            n=n,
            kind=kind,
            outcome=outcome,
            values={**original, **values},
            argv=(),
            environment={},
            dropin=None if n == 0 else "[Service]\n",
            started_at=t0 + 600 * n,
            who=who if n else "the unit's own files",
            profile=host,
            **extra,
        )

    entries = (
        entry(0, "original", "original", {}),
        entry(
            1,
            "change",
            "kept",
            {"budget": 6},
            accept_len=4.31,
            soaked_s=60.0,
            invocation_id="1" * 32,
        ),
        entry(
            2,
            "change",
            "rolled_back",
            {"budget": 16},
            signature="illegal_memory_access",
            stage="soak",
            ready_to_crash_s=4.2,
            reason="crash: illegal_memory_access",
            exception_line="torch.AcceleratorError: CUDA error: an illegal memory access",
            restarts=3,
        ),
        entry(3, "change", "abandoned", {"budget": 4, "cuda_graph": False}),
        entry(
            4,
            "rollback",
            "kept",
            {"budget": 6},
            accept_len=4.36,
            soaked_s=60.0,
            invocation_id="4" * 32,
        ),
    )
    return HostHistory(
        host=host,
        unit=UNIT,
        path=f"/var/lib/specops/{UNIT}/history.json",
        entries=entries,
        running={**original, "budget": 6},
    )
