"""Real hosts for the testbed tests: booted once per session, healed before every test.

They need root (network namespaces, veth pairs, systemd as PID 1 of a PID namespace). As
non-root every testbed test is skipped, and the run's summary says so in capitals; as root
(CI) a host that fails to boot is a failure, never a skip.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.testbed.bed import Testbed

SKIP_REASON = (
    "testbed needs root (network namespaces, veth pairs, systemd as PID 1 of a PID namespace); "
    "run the suite as root, as CI does, to prove the real-host behaviour"
)


@pytest.fixture(scope="session")
def testbed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Testbed]:
    if os.geteuid() != 0:
        pytest.skip(SKIP_REASON)
    hosts = int(os.environ.get("SPECOPS_TESTBED_HOSTS", "2"))
    bed = Testbed(tmp_path_factory.mktemp("testbed"), hosts)
    bed.start()
    yield bed
    bed.stop()


@pytest.fixture
def bed(testbed: Testbed) -> Testbed:
    """The session's hosts, back in their booted state (link up, sshd up, original unit)."""
    testbed.heal()
    return testbed


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    skipped = [
        report
        for report in terminalreporter.stats.get("skipped", [])
        if SKIP_REASON in str(getattr(report, "longrepr", ""))
    ]
    if skipped:
        terminalreporter.write_sep(
            "!", f"{len(skipped)} TESTBED TESTS SKIPPED: {SKIP_REASON}", yellow=True, bold=True
        )
