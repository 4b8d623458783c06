"""A fleet fed a fixed script through the real Fleet's delivery path (stable screenshots).

Pilot tests elsewhere run the app on live simulated hosts; screenshots need every number and
timestamp on screen to be the same on every run, so here the engine's own entry points
(`_state_changed`, `_remember`, `_journal_delivery`) receive fixed events instead of SSH.
"""

from __future__ import annotations

import time
from pathlib import Path

from console.events import JournalEntry, ServiceStatus
from console.evidence.package import Artifact
from console.evidence.snapshot import HostSnapshot, PackageResult, SnapshotReport
from console.evidence.transfer import Outcome
from console.fleet import Fleet
from console.profiles import Profile, load_fleet
from console.transport.ssh import ConnState, HostState

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


RELEASES = ("0.5.23", "0.5.9-ddtree")
"""The SGLang release each scripted host reports, in turn (the demo fleet mixes releases)."""


class ScriptedFleet(Fleet):
    def start(self) -> None:
        now = time.time()
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
