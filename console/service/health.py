"""What "healthy" can mean on each SGLang release, and which endpoint says it.

Before 0.5.3 `/health` is a plain liveness 200 (`return Response(status_code=200)`, answered
while the model is still loading); `/health_generate` runs one token through the scheduler on
every release from 0.3.6. From 0.5.3 `/health` is `/health_generate` (503 during start-up and
after `SGLANG_HEALTH_CHECK_TIMEOUT`). Server information is `/get_server_info` from 0.4.1 and
`/server_info` from 0.5.6 (the old path deprecated). Readiness therefore asks
`/health_generate` where `/health` would only say the process is up; the smoke completion runs
after it on every release, so a server that is up but answers garbage is never called healthy.
Pure: no I/O.
"""

from __future__ import annotations

from console.service.catalogue import release_key

__all__ = ["health_is_liveness", "readiness_path", "server_info_path"]

_GENERATING_HEALTH = (0, 5, 3)
_SERVER_INFO = (0, 5, 6)
_GET_SERVER_INFO = (0, 4, 1)


def health_is_liveness(version: str | None) -> bool:
    """True when `/health` of `version` answers 200 before the model can serve."""
    key = None if version is None else release_key(version)
    return key is not None and key < _GENERATING_HEALTH


def readiness_path(version: str | None, configured: str) -> str:
    """The path the rollout polls: the profile's, unless it is a liveness-only `/health`."""
    if configured == "/health" and health_is_liveness(version):
        return "/health_generate"
    return configured


def server_info_path(version: str | None) -> str | None:
    """`/server_info` (0.5.6 on), `/get_server_info` (0.4.1 on), None before; unknown
    releases get the new path."""
    key = None if version is None else release_key(version)
    if key is None or key >= _SERVER_INFO:
        return "/server_info"
    return "/get_server_info" if key >= _GET_SERVER_INFO else None
