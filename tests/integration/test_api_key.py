"""A server started with `--api-key` passes health and smoke: the key is sent as Bearer.

Finding of the attack run (issue 20): no `Authorization` header was sent, the smoke test got
HTTP 401, and every change to such a server was rolled back. The simulated server now
demands the key the way SGLang's `--api-key` middleware does.
"""

from __future__ import annotations

import asyncio

import pytest

from console.hosts.events import RolloutOutcome
from console.hosts.profiles import Profile
from console.service.execline import render_execstart
from console.service.unit import effective_service
from console.sim.fleet import SimFleet
from console.transport import http
from console.transport.ssh import HostSession
from console.tuning.smoke import server_api_key
from tests.integration.test_rollout import UNIT, change, connect


@pytest.mark.parametrize("spelled", ["--api-key=sk-sim-42", "${SERVER_KEY}"])
async def test_a_change_to_a_server_with_an_api_key_is_kept(
    sim: SimFleet, profiles: list[Profile], spelled: str
) -> None:
    host = sim.hosts[profiles[0].name]
    service = effective_service(host.unit.cat())
    key = ["--api-key=sk-sim-42"] if spelled.startswith("--") else ["--api-key", spelled]
    dropin = host.root / f"etc/systemd/system/{UNIT}.d/50-key.conf"
    dropin.parent.mkdir(parents=True, exist_ok=True)
    dropin.write_text(
        f"[Service]\nExecStart=\nExecStart={render_execstart([*service.argv, *key])}\n"
        'Environment="SERVER_KEY=sk-sim-42"\n'
    )
    host.unit.daemon_reload()
    await host.unit.restart()
    session = await connect(profiles[0])
    try:
        # the simulated server demands it, as SGLang does
        for _ in range(200):
            if (await _status(session, "/health", None)) == 200:
                break
            await asyncio.sleep(0.05)
        assert await _status(session, "/v1/models", None) == 401
        assert await _status(session, "/v1/models", "wrong") == 401
        assert await _status(session, "/v1/models", "sk-sim-42") == 200
        result, _ = await change(session, "budget=4")
        assert result.outcome is RolloutOutcome.APPLIED, result.reason
    finally:
        await session.close()


async def _status(session: HostSession, path: str, key: str | None) -> int:
    try:
        response = await http.request(
            session, session.profile.service.port, "GET", path, api_key=key
        )
    except http.HttpError:
        return 0
    return response.status


def test_the_key_is_read_from_the_command_line_or_its_environment() -> None:
    assert server_api_key(["x", "--api-key", "k1"], {}) == "k1"
    assert server_api_key(["x", "--api-key=k2"], {}) == "k2"
    assert server_api_key(["x", "--api-key", "$K"], {"K": "k3"}) == "k3"
    assert server_api_key(["x", "--api-key", "${K}"], {"K": "k4"}) == "k4"
    assert server_api_key(["x", "--port", "1"], {}) is None
    with pytest.raises(ValueError, match="printable ASCII"):
        http.build_request("GET", "/v1/models", 1, api_key="k\r\nX-Evil: 1")
    assert b"Authorization: Bearer k1\r\n" in http.build_request("GET", "/", 1, api_key="k1")
