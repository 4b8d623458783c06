"""Probation's window and decisions, on an injected clock: a crash 5 minutes after a kept
change is on probation (rolled back, or left alone when cancelled); 31 minutes after, it is
an alert only; a read-only console changes nothing on the host."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field, replace

import pytest

from console.hosts.events import (
    ConnState,
    CrashDetected,
    HostState,
    HostStateChanged,
    InvocationChanged,
)
from console.hosts.profiles import Profile
from console.ledger import campaigns
from console.ledger.campaigns import Campaign, Cell
from console.transport import remote
from console.transport.host_files import STATE_ROOT
from console.transport.ssh import Result
from console.tuning.history import HistoryEntry, history_path
from console.tuning.plan import Plan
from console.tuning.probation import (
    UNSIGNED,
    CampaignSeen,
    Probation,
    ProbationAnnounced,
    ProbationCancelled,
    ProbationDone,
    ProbationEvent,
    probation_of,
    rollback_entry,
)
from tests.stand_ins import FakeClock, PlannedOnlyGuard

UNIT = "sglang-k26-ddtree.service"
KEPT_AT = 1_800_000_000.0
FIVE_MINUTES = 300.0


def entry(n: int, outcome: str, running: int, kind: str = "change") -> HistoryEntry:
    return HistoryEntry(
        n=n,
        kind=kind,
        outcome=outcome,
        values={"max_running": running},
        argv=["python3", "-m", "sglang.launch_server", "--max-running-requests", str(running)],
        environment={},
        dropin=None if kind == "original" else f"max running {running}",
        started_at=KEPT_AT - 60 * n,
        finished_at=KEPT_AT if n == 2 else KEPT_AT - 600,
        invocation_id=f"{n:032x}",
    )


HISTORY = [entry(0, "original", 32, "original"), entry(1, "kept", 64), entry(2, "kept", 256)]


def test_five_minutes_after_a_kept_change_the_host_is_on_probation() -> None:
    probation = probation_of("b300", HISTORY, 1800, KEPT_AT + FIVE_MINUTES)
    assert probation is not None and probation.entry.n == 2
    assert probation.covers(KEPT_AT + FIVE_MINUTES)
    assert probation.label(KEPT_AT + FIVE_MINUTES) == "probation 25m left"
    assert probation.label(KEPT_AT + 1790) == "probation 10s left"
    assert not probation.covers(KEPT_AT - 1)  # the change's own restart came before


@pytest.mark.parametrize(
    ("history", "probation_s", "now"),
    [
        (HISTORY, 1800, KEPT_AT + 1801),  # the window is over
        (HISTORY, 0, KEPT_AT + 1),  # probation off
        ([*HISTORY, entry(3, "started", 512)], 1800, KEPT_AT + 1),  # a change is running
        ([*HISTORY, entry(3, "rolled_back", 512)], 1800, KEPT_AT + 1),  # a newer change failed
        ([], 1800, KEPT_AT),
    ],
)
def test_no_probation(history: list[HistoryEntry], probation_s: float, now: float) -> None:
    assert probation_of("b300", history, probation_s, now) is None


def test_the_rollback_goes_to_the_newest_good_entry_before_the_failed_one() -> None:
    assert rollback_entry(HISTORY, HISTORY[2]) == HISTORY[1]
    assert rollback_entry(HISTORY[:2], HISTORY[1]) == HISTORY[0]


# --- the guard, against a host that keeps its files in a dict --------------------------


CAT = f"""# /etc/systemd/system/{UNIT}
[Service]
ExecStart=/usr/bin/python3 -m sglang.launch_server --port 30001 --max-running-requests 32

# /etc/systemd/system/{UNIT}.d/zz-specops.conf
[Service]
ExecStart=
ExecStart=/usr/bin/python3 -m sglang.launch_server --port 30001 --max-running-requests 256
"""
CRASH_LINES = [
    "Scheduler hit an exception: Traceback (most recent call last):",
    "RuntimeError: CUDA error: CUBLAS_STATUS_EXECUTION_FAILED when calling `cublasGemmEx(...)`",
]


@dataclass
class FakeSession:
    """What the guard asks of a session: run(), answered from `files`."""

    profile: Profile
    files: dict[str, str] = field(default_factory=dict)
    name: str = "b300"
    journal: list[str] = field(default_factory=lambda: list(CRASH_LINES))

    async def run(
        self, command: remote.Command, timeout: float = 30.0, check: bool = True
    ) -> Result:
        argv = command.argv
        stdout = ""
        if argv[0] == "sh":  # read_if_exists
            stdout = self.files.get(argv[-1], "")
        elif argv[0] == "tee":
            self.files[argv[-1]] = command.stdin or ""
        elif argv[0] == "mv":
            self.files[argv[-1]] = self.files.pop(argv[-2])
        elif argv[0] == "journalctl":
            stdout = "".join(
                json.dumps({"MESSAGE": m, "__CURSOR": "c"}) + "\n" for m in self.journal
            )
        elif argv[:2] == ("systemctl", "cat"):
            stdout = CAT
        return Result(" ".join(argv), 0, stdout, "", 0.0)

    async def wait_connected(self, timeout: float | None = None) -> bool:
        return True


def stored(session: FakeSession) -> list[dict[str, object]]:
    entries: list[dict[str, object]] = json.loads(session.files[history_path(UNIT, STATE_ROOT)])[
        "entries"
    ]
    return entries


def crash_at(at: float) -> CrashDetected:
    return CrashDetected(
        "b300", f"{2:032x}", "cublas", CRASH_LINES[0], CRASH_LINES[1], None, at, "c"
    )


class Harness:
    def __init__(self, profile: Profile, *, read_only: str | None = None) -> None:
        self.session = FakeSession(profile)
        text = json.dumps({"version": 1, "entries": [e.record() for e in HISTORY]})
        self.session.files[history_path(UNIT, STATE_ROOT)] = text
        self.events: list[ProbationEvent] = []
        self.clock = FakeClock(KEPT_AT + FIVE_MINUTES)
        self.guard = PlannedOnlyGuard(
            {"b300": self.session},
            self.events.append,
            read_only=read_only,
            countdown_s=0.05,
            clock=self.clock,
            tick_s=0.01,
        )

    @property
    def plans(self) -> list[Plan]:
        return self.guard.plans

    async def settle_tasks(self) -> None:
        """Let the guard's reads (history, campaigns) run to their end."""
        for _ in range(1000):
            await asyncio.sleep(0)
            if not self.guard._tasks and not self.guard._busy:
                return
        raise AssertionError("the guard's reads never finished")

    async def settle(self) -> None:
        """Run the guard to its end, its countdown's clock moved on whenever it waits."""
        for _ in range(10_000):
            await asyncio.sleep(0)
            if not self.guard._busy:
                return
            if self.clock.waiting:
                self.clock.advance(self.guard.tick_s)
        raise AssertionError("the guard never finished")


async def test_a_crash_five_minutes_after_kept_is_rolled_back(profile: Profile) -> None:
    h = Harness(profile)
    h.guard.observe(crash_at(KEPT_AT + FIVE_MINUTES))
    await h.settle()
    announced = next(e for e in h.events if isinstance(e, ProbationAnnounced))
    assert announced.reason is None and announced.crash.since_kept_s == FIVE_MINUTES
    assert announced.target.startswith("history entry 1 (max_running=64")
    (plan,) = h.plans
    assert plan.new_values["max_running"] == 64
    done = [e for e in h.events if isinstance(e, ProbationDone)]
    assert done and done[-1].ok and "back on history entry 1" in done[-1].detail
    failed = stored(h.session)[2]
    assert failed["outcome"] == "rolled_back" and failed["stage"] == "probation"
    assert failed["kept_to_crash_s"] == FIVE_MINUTES and failed["signature"] == "cublas"
    assert "CUBLAS_STATUS_EXECUTION_FAILED" in str(failed["exception_line"])
    # A crash loop is one probation failure: the next restart does nothing more.
    h.guard.observe(InvocationChanged("b300", f"{3:032x}", f"{2:032x}", KEPT_AT + FIVE_MINUTES + 2))
    await h.settle()
    assert len(h.plans) == 1


async def test_a_restart_seen_before_its_crash_line_is_announced_by_the_crash(
    profile: Profile,
) -> None:
    """A console started after the crash (or whose follower reconnected across it) sees only
    the new invocation; the dead run's journal still names the crash."""
    h = Harness(profile)
    h.guard.observe(InvocationChanged("b300", f"{3:032x}", f"{2:032x}", KEPT_AT + FIVE_MINUTES))
    await h.settle()
    announced = next(e for e in h.events if isinstance(e, ProbationAnnounced))
    assert announced.crash.signature == "cublas"
    assert "CUBLAS_STATUS_EXECUTION_FAILED" in announced.crash.line
    assert stored(h.session)[2]["signature"] == "cublas"


async def test_a_restart_with_no_crash_signature_is_an_alert_not_a_rollback(
    profile: Profile,
) -> None:
    h = Harness(profile)
    h.session.journal = ["Decode batch, accept len: 4.41", "Received SIGTERM, shutting down"]
    before = dict(h.session.files)
    h.guard.observe(InvocationChanged("b300", f"{3:032x}", f"{2:032x}", KEPT_AT + FIVE_MINUTES))
    await h.settle()
    announced = next(e for e in h.events if isinstance(e, ProbationAnnounced))
    assert announced.crash.signature is None and announced.reason == UNSIGNED
    assert h.plans == [] and h.session.files == before  # nothing noted, nothing changed
    # The same configuration crashing later in the window is still rolled back.
    h.session.journal = list(CRASH_LINES)
    h.guard.observe(crash_at(KEPT_AT + FIVE_MINUTES + 60))
    await h.settle()
    (plan,) = h.plans
    assert plan.new_values["max_running"] == 64


def test_a_kept_rollback_is_not_on_probation() -> None:
    """Going back (the operator's rollback, or probation's) is where someone chose to be: a
    crash there is an alert, never a rollback to the configuration just left."""
    back = replace(entry(3, "kept", 64, "rollback"), finished_at=KEPT_AT + 10)
    assert probation_of("b300", [*HISTORY, back], 1800, KEPT_AT + FIVE_MINUTES) is None


async def test_cancelling_the_countdown_leaves_the_host_alone(profile: Profile) -> None:
    h = Harness(profile)
    h.guard.countdown_s = 30
    h.guard.observe(crash_at(KEPT_AT + FIVE_MINUTES))
    await h.clock.when_waiting()
    assert h.guard.counting_down() == ["b300"]
    assert h.guard.cancel() == ["b300"]
    await h.settle()
    assert h.plans == []
    assert any(isinstance(e, ProbationCancelled) for e in h.events)
    kept = stored(h.session)[2]
    assert kept["outcome"] == "kept" and kept["stage"] == "probation"
    assert "cancelled" in str(kept["reason"])
    # A console started later finds the same crash in the journal: the history says it was
    # noted (and left alone by the operator), so it is not rolled back after all.
    later = Harness(profile)
    later.session.files = h.session.files
    later.guard.observe(crash_at(KEPT_AT + FIVE_MINUTES))
    await later.settle()
    assert later.plans == []
    assert not any(isinstance(e, ProbationAnnounced) for e in later.events)


async def test_a_crash_31_minutes_after_kept_is_only_an_alert(profile: Profile) -> None:
    h = Harness(profile)
    h.clock.now = KEPT_AT + 31 * 60
    h.guard.observe(crash_at(KEPT_AT + 31 * 60))
    await h.settle()
    assert h.plans == [] and not any(isinstance(e, ProbationAnnounced) for e in h.events)
    assert h.guard.state("b300") is None


async def test_read_only_announces_and_writes_nothing(profile: Profile) -> None:
    h = Harness(profile, read_only="read-only (--read-only)")
    before = dict(h.session.files)
    h.guard.observe(crash_at(KEPT_AT + FIVE_MINUTES))
    await h.settle()
    announced = next(e for e in h.events if isinstance(e, ProbationAnnounced))
    assert announced.reason == "read-only (--read-only): alert only"
    assert h.plans == [] and h.session.files == before


def test_probation_is_a_plain_value() -> None:
    p = Probation("b300", HISTORY[2], KEPT_AT, KEPT_AT + 1800)
    assert p.left_s(KEPT_AT + 1900) == 0.0


async def test_a_crash_of_a_host_a_campaign_owns_is_left_to_the_campaign(profile: Profile) -> None:
    h = Harness(profile)
    running = Campaign(
        id=campaigns.new_id(), host="b300", unit=UNIT, grid={"budget": [4]}, start={}
    )
    running.updated_at = h.clock.time()  # written a moment ago: the campaign is alive
    listing = f"{running.id}.json\n{json.dumps(running.record())}\n"
    h.session.files[campaigns.campaigns_dir(UNIT, STATE_ROOT)] = listing
    h.guard.observe(crash_at(KEPT_AT + FIVE_MINUTES))
    await h.settle()
    assert not any(isinstance(e, ProbationAnnounced) for e in h.events)
    assert h.plans == []
    assert stored(h.session)[2]["outcome"] == "kept"  # nothing noted: the cell is the campaign's


async def test_a_campaign_owning_the_host_is_said_on_connect_and_its_end_on_a_restart(
    profile: Profile,
) -> None:
    """The fleet table marks a host under campaign: the guard reads the host's campaign
    records when it connects and whenever the server restarts (every cell restarts it)."""
    h = Harness(profile)
    running = Campaign(
        id=campaigns.new_id(), host="b300", unit=UNIT, grid={"budget": [4, 6]}, start={},
        cells=[Cell({"budget": 4}, "measured"), Cell({"budget": 6})],
    )  # fmt: skip
    running.updated_at = h.clock.time()
    directory = campaigns.campaigns_dir(UNIT, STATE_ROOT)
    h.session.files[directory] = f"{running.id}.json\n{json.dumps(running.record())}\n"
    h.guard.observe(HostStateChanged(HostState("b300", ConnState.CONNECTED)))
    await h.settle_tasks()
    seen = [e for e in h.events if isinstance(e, CampaignSeen)]
    assert [(e.host, e.campaign) for e in seen] == [("b300", f"campaign {running.id}: 1/2 cells")]
    running.state = "finished"
    h.session.files[directory] = f"{running.id}.json\n{json.dumps(running.record())}\n"
    h.clock.now = KEPT_AT + 31 * 60  # past the probation: the restart is only a restart
    h.guard.observe(InvocationChanged("b300", f"{4:032x}", f"{3:032x}", h.clock.now))
    await h.settle_tasks()
    seen = [e for e in h.events if isinstance(e, CampaignSeen)]
    assert seen[-1].campaign is None and len(seen) == 2
