"""A tiny HTTP/1.0 client that talks to a host's SGLang port through the SSH connection.

The server usually listens on 127.0.0.1 of the GPU host, so specops opens a direct TCP
channel over the host's existing SSH connection (`HostSession.open_tcp`) and speaks plain
HTTP/1.0 with `Connection: close` on it: one request, read to EOF, done. That is all
`/health`, `/v1/models` and a smoke completion need, and it keeps the wire format visible
(no local port forward listening on the operator's machine, no extra dependency).
"""

from __future__ import annotations

import asyncio
import json
import re
from dataclasses import dataclass
from typing import Any

import asyncssh

from console.transport.ssh import Disconnected, HostSession

MAX_RESPONSE = 4 * 1024 * 1024
_PATH_RE = re.compile(r"^/[!-~]*$")  # printable ASCII, no spaces: nothing to smuggle a header in
_TOKEN_RE = re.compile(r"^[!-~]+$")


class HttpError(Exception):
    """No usable answer (timeout, malformed response, too large)."""


class PortClosed(HttpError):
    """Nothing listens on the port (yet): the server is still starting, or it is down."""


@dataclass(frozen=True)
class HttpResponse:
    status: int
    reason: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        try:
            return json.loads(self.body or b"null")
        except ValueError as exc:
            raise HttpError(f"HTTP {self.status}: the body is not JSON: {exc}") from None


def build_request(
    method: str,
    path: str,
    port: int,
    body: Any | None = None,
    host: str = "127.0.0.1",
    api_key: str | None = None,
) -> bytes:
    """One HTTP/1.0 request; with `api_key`, `Authorization: Bearer` as SGLang's `--api-key`
    middleware demands (it answers 401 to every path but /health and /metrics without it)."""
    if method not in ("GET", "POST"):
        raise ValueError(f"unsupported HTTP method {method!r}")
    if not _PATH_RE.match(path):
        raise ValueError(f"HTTP path {path!r} must start with '/' and be printable ASCII")
    lines = [f"{method} {path} HTTP/1.0", f"Host: {host}:{port}", "Connection: close"]
    if api_key is not None:
        if not _TOKEN_RE.match(api_key):
            raise ValueError("the server's API key must be printable ASCII without spaces")
        lines.append(f"Authorization: Bearer {api_key}")
    payload = b""
    if body is not None:
        payload = json.dumps(body).encode("utf-8")
        lines += ["Content-Type: application/json", f"Content-Length: {len(payload)}"]
    lines.append("Accept: application/json")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("ascii") + payload


def parse_response(raw: bytes) -> HttpResponse:
    head, sep, body = raw.partition(b"\r\n\r\n")
    if not sep:
        raise HttpError("the connection closed before the response headers ended")
    lines = head.decode("latin-1").split("\r\n")
    match = re.fullmatch(r"HTTP/\d\.\d (\d{3})(?: (.*))?", lines[0])
    if match is None:
        raise HttpError(f"not an HTTP response: {lines[0][:80]!r}")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    length = headers.get("content-length")
    if length is not None and length.isdigit():
        body = body[: int(length)]
    return HttpResponse(int(match.group(1)), match.group(2) or "", headers, body)


async def request(
    session: HostSession,
    port: int,
    method: str,
    path: str,
    *,
    body: Any | None = None,
    timeout: float = 10.0,
    api_key: str | None = None,
) -> HttpResponse:
    """One request to 127.0.0.1:`port` on the host. Raises PortClosed, HttpError, Disconnected."""
    data = build_request(method, path, port, body, api_key=api_key)
    try:
        async with asyncio.timeout(timeout):
            reader, writer = await session.open_tcp(port)
    except TimeoutError:
        raise HttpError(f"opening 127.0.0.1:{port} timed out after {timeout:.0f}s") from None
    except Disconnected as exc:
        if isinstance(exc.__cause__, asyncssh.ChannelOpenError):
            raise PortClosed(f"nothing listens on 127.0.0.1:{port}") from None
        raise
    try:
        writer.write(data)
        async with asyncio.timeout(timeout):
            raw = await _read_all(reader)
    except TimeoutError:
        raise HttpError(f"{method} {path}: no complete answer within {timeout:.0f}s") from None
    except (OSError, asyncssh.Error) as exc:
        raise HttpError(f"{method} {path}: {exc}") from None
    finally:
        writer.close()
    return parse_response(raw)


async def _read_all(reader: asyncssh.SSHReader[bytes]) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while True:
        chunk = await reader.read(65536)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        size += len(chunk)
        if size > MAX_RESPONSE:
            raise HttpError(f"the response is larger than {MAX_RESPONSE} bytes")
