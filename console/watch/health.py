"""`probe_health`: one word for "does the server answer `/health`?", for the table and `status`.

systemd's `active/running` says the process exists, not that it serves: a server whose
scheduler is wedged or that answers 503 looked fine in the fleet table. The probe is one
HTTP/1.0 GET through the host's SSH connection (no command, so nothing in the audit log),
bounded by a short timeout so a hung server reads `timeout` instead of holding a poll.
"""

from __future__ import annotations

from console.transport import http
from console.transport.ssh import Disconnected, HostSession

HEALTH_TIMEOUT_S = 3.0
"""A healthy SGLang answers /health in milliseconds; three seconds is already a hang."""

OK = "ok"
TIMEOUT = "timeout"
CLOSED = "closed"
"""Nothing listens on the service port: starting, or down."""
ERROR = "error"
"""An answer that is not HTTP (or too large)."""
UNREACHABLE = "unreachable"
"""The SSH connection itself dropped during the probe, or carried no channel to the port in
time (a hung server still accepts the connection: the link is what stalled)."""


async def probe_health(session: HostSession, timeout: float = HEALTH_TIMEOUT_S) -> str:
    """`ok`, the HTTP status of any other answer (`503`), `timeout`, `closed`, `error`."""
    service = session.profile.service
    try:
        response = await http.request(
            session, service.port, "GET", service.health_path, timeout=timeout
        )
    except http.PortClosed:
        return CLOSED
    except http.HttpError as exc:
        if str(exc).startswith("opening "):
            return UNREACHABLE
        return TIMEOUT if "timed out" in str(exc) or "within" in str(exc) else ERROR
    except Disconnected:
        return UNREACHABLE
    return OK if response.status == 200 else str(response.status)
