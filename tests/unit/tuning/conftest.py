"""The simulated fleet's b300 profile, loaded without a host (no build check: no host to ask)."""

from __future__ import annotations

from pathlib import Path

import pytest

from console.hosts.profiles import Profile, load_profile
from console.sim.fleet import render_profile


@pytest.fixture
def profile(tmp_path: Path) -> Profile:
    path = tmp_path / "b300.toml"
    text = render_profile(
        name="b300",
        port=22,
        key=tmp_path / "key",
        known_hosts=tmp_path / "known_hosts",
        ssh_config=tmp_path / "ssh_config",
        keepalive=5,
        ready_timeout=30,
        package=tmp_path / "package",
    )
    path.write_text(text.replace("soak_s = 60\n", "soak_s = 60\ncheck_flags = false\n"))
    return load_profile(path)
