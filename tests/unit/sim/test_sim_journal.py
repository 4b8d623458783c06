"""The simulated journal answers `-n`, `--after-cursor` and `-r` as journald does, also once
its ring has dropped the oldest entries (it seeks from the end; it no longer reads all)."""

from __future__ import annotations

from console.sim.journal import SimJournal, parse_journalctl, select


def messages(journal: SimJournal, *args: str) -> list[str]:
    entries, _ = select(journal, parse_journalctl(["journalctl", *args]))
    return [e.fields["MESSAGE"] for e in entries]


def test_lines_are_the_units_newest_oldest_first_after_the_ring_wrapped() -> None:
    journal = SimJournal(max_entries=10)
    for i in range(30):  # a.service and b.service interleaved; only the last 10 are kept
        journal.append("a.service" if i % 2 else "b.service", f"line {i}")
    assert messages(journal, "-u", "a.service", "-n", "3") == ["line 25", "line 27", "line 29"]
    assert messages(journal, "-u", "a.service", "--lines=99") == [
        f"line {i}" for i in (21, 23, 25, 27, 29)
    ]
    assert messages(journal, "-u", "a.service", "-n", "2", "-r") == ["line 29", "line 27"]
    assert messages(journal, "-n", "0") == []
    assert messages(journal) == [f"line {i}" for i in range(20, 30)]
    assert [e.seq for e in journal.entries_after(27)] == [28, 29, 30]
    assert [e.seq for e in journal.entries_after(0)] == list(range(21, 31))


def test_lines_after_a_cursor_never_reach_back_before_it() -> None:
    journal = SimJournal()
    entries = [journal.append("a.service", f"line {i}") for i in range(6)]
    assert entries[3] is not None  # no rate limit set: nothing is dropped
    cursor = journal.cursor(entries[3])
    assert messages(journal, f"--after-cursor={cursor}", "-n", "5") == ["line 4", "line 5"]
    assert messages(journal, f"--cursor={cursor}", "-n", "1") == ["line 5"]


def test_kernel_lines_are_dmesgs_and_no_units() -> None:
    journal = SimJournal()
    journal.append("a.service", "served")
    journal.kernel("NVRM: Xid (PCI:0000:00:06): 31, pid=477, name=python3")
    assert messages(journal, "--dmesg") == ["NVRM: Xid (PCI:0000:00:06): 31, pid=477, name=python3"]
    assert messages(journal, "-k", "-n", "5") == messages(journal, "--dmesg")
    assert messages(journal, "-u", "a.service") == ["served"]  # the unit's lines only
