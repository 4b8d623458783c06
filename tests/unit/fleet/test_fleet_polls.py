"""An idle fleet is cheap: hosts off screen read their status less often, and no round of
fallback reads lands on every host in the same instant."""

from __future__ import annotations

from pathlib import Path

from console.fleet.fleet import OFFSCREEN_POLL_FACTOR, POLL_JITTER, Fleet
from console.hosts.profiles import Profile, parse_profile


def profile(name: str) -> Profile:
    data = {"name": name, "ssh": {"host": "10.0.0.5"}, "service": {"unit": "sglang.service"}}
    return parse_profile(data, Path(f"{name}.toml"))


def test_hosts_off_screen_wait_longer_and_no_two_waits_agree() -> None:
    fleet = Fleet([profile("shown"), profile("hidden")], poll_s=30.0)
    lo, hi = 30.0 * (1 - POLL_JITTER), 30.0 * (1 + POLL_JITTER)
    assert all(lo <= fleet.poll_wait("hidden") <= hi for _ in range(50))  # no screen: all alike
    fleet.watched = {"shown"}.__contains__
    shown = [fleet.poll_wait("shown") for _ in range(50)]
    hidden = [fleet.poll_wait("hidden") for _ in range(50)]
    assert all(lo <= w <= hi for w in shown)
    assert all(lo * OFFSCREEN_POLL_FACTOR <= w <= hi * OFFSCREEN_POLL_FACTOR for w in hidden)
    assert len(set(shown)) > 40  # spread, not one instant for every host
