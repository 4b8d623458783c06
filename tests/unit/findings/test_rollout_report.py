"""The report's group rollouts: each host's record of one rollout read back as one, with
what came after on a host (a probation rollback) and the fleet's line."""

from __future__ import annotations

from console.findings.rollout_report import rollout_lines
from console.ledger.ledger import Experiment, Side, WindowStats


def experiment(
    host: str,
    started: str,
    *,
    rollout: str = "r1",
    outcome: str = "kept",
    accept: float | None = 4.4,
    action: str = "group-set",
    flags: tuple[int, int] = (8, 4),
    signature: str | None = None,
    cause: str = "",
) -> Experiment:
    windows = {} if accept is None else {"accept_len": WindowStats.of([accept, accept + 0.02])}
    return Experiment(
        host=host,
        unit="sglang.service",
        started=started,
        finished=started,
        outcome=outcome,
        before=Side("a", {"budget": flags[0], "topk": 4}),
        after=Side("b", {"budget": flags[1], "topk": 4}, {k: v for k, v in windows.items() if v}),
        signature=signature,
        phase="soak" if signature else None,
        action=action,
        rollout=rollout,
        cause=cause,
    )


def lines(*found: tuple[str, str, Experiment]) -> list[str]:
    return rollout_lines(list(found), lambda rel: f"[{rel}]", str)


def test_no_rollout_no_section() -> None:
    assert lines(("a", "x.json", experiment("a", "2026-12-07T10:00:00+00:00", rollout=""))) == []


def test_each_host_once_then_what_came_after_and_the_fleets_line() -> None:
    t = "2026-12-07T10:0{}:00+00:00"
    out = lines(
        ("gpu2", "e/gpu2/1.json", experiment("gpu2", t.format(2), accept=4.40)),
        ("gpu1", "e/gpu1/1.json", experiment("gpu1", t.format(1), accept=4.36)),
        ("gpu3", "e/gpu3/1.json", experiment("gpu3", t.format(3), accept=4.50)),
        (
            "gpu3",
            "e/gpu3/2.json",
            experiment(
                "gpu3",
                t.format(6),
                action="probation-rollback",
                flags=(4, 8),
                cause="cublas 42s after entry 3 was kept (rollout r1)",
            ),
        ),
        ("solo", "e/solo/1.json", experiment("solo", t.format(4), rollout="")),
    )
    assert out[:4] == ["## Group rollouts", "", "### Rollout r1", ""]
    rows = [line for line in out if line.startswith("| gpu")]
    assert [r.split(" | ")[0] for r in rows] == ["| gpu1", "| gpu2", "| gpu3"]  # by start
    assert rows[0] == ("| gpu1 | budget=4 ([e/gpu1/1.json]) | kept | 4.37 ± 0.01 (n=2) | - |")
    assert rows[2].endswith(
        "| probation rollback: cublas 42s after entry 3 was kept (rollout r1) ([e/gpu3/2.json]) |"
    )
    # The host rolled back by probation does not count as staying on it.
    assert "budget=4 kept on 2 of 3 hosts: accept len 4.39 ± 0.03 across them; " in out[-2]
    assert out[-2].endswith("1 probation rollback.")
    assert not any("solo" in line for line in out)


def test_a_host_rolled_back_by_its_own_rollout_is_named_with_its_signature() -> None:
    out = lines(
        (
            "gpu1",
            "e/1.json",
            experiment(
                "gpu1",
                "2026-12-07T10:00:00+00:00",
                outcome="rolled_back",
                accept=None,
                signature="illegal_memory_access",
            ),
        )
    )
    assert "| rolled back (illegal_memory_access, soak) | - | - |" in out[6]
    assert out[-2] == "budget=4 kept on 0 of 1 hosts; no probation rollback."
