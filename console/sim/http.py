"""A minimal HTTP/1.x server loop for the simulated SGLang (stdlib only).

Works on asyncio streams (the testbed's real process) and on asyncssh channel streams (the
in-process host, where the console's TCP connection arrives through the SSH connection).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol


@dataclass(frozen=True)
class TextPage:
    """A non-JSON body (`/metrics`): `render(accept)` gives its content type and text for the
    request's Accept header, as prometheus_client negotiates the exposition format."""

    render: Callable[[str], tuple[str, str]]


Route = Callable[[str, str, bytes, dict[str, str]], tuple[int, dict[str, object] | TextPage]]
"""(method, path, body, headers with lower-case names) → (status, JSON body or a page)."""

REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    404: "Not Found",
    503: "Service Unavailable",
}


class _Reader(Protocol):
    async def readline(self) -> bytes: ...
    async def readexactly(self, n: int) -> bytes: ...


async def serve_http(reader: _Reader, writer: Any, route: Route) -> None:
    """Answer one request, then close (the console speaks HTTP/1.0 with Connection: close)."""
    try:
        request_line = (await reader.readline()).decode("latin-1").strip()
        parts = request_line.split()
        if len(parts) < 2:
            return
        method, path = parts[0], parts[1]
        headers: dict[str, str] = {}
        while True:
            header = (await reader.readline()).decode("latin-1").strip()
            if not header:
                break
            name, _, value = header.partition(":")
            headers[name.strip().lower()] = value.strip()
        length = int(headers.get("content-length") or 0)
        body = await reader.readexactly(length) if length else b""
        status, payload = route(method, path, body, headers)
        if isinstance(payload, TextPage):
            content_type, text = payload.render(headers.get("accept", ""))
            data = text.encode()
        else:
            content_type, data = "application/json", json.dumps(payload).encode()
        head = (
            f"HTTP/1.1 {status} {REASONS.get(status, 'Error')}\r\n"
            f"Content-Type: {content_type}\r\n"
            f"Content-Length: {len(data)}\r\nConnection: close\r\n\r\n"
        )
        writer.write(head.encode() + data)
        with contextlib.suppress(Exception):
            await writer.drain()
    except (OSError, ValueError, EOFError) as exc:
        del exc
    finally:
        with contextlib.suppress(Exception):
            writer.close()
