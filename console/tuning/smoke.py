"""The smoke completion: one deterministic prompt a healthy server must answer correctly.

`/health` only says the server is up. The DDTree budget-32 bug served garbage while healthy,
so a change is only kept once the profile's prompt (`2+2=` at temperature 0) comes back
containing the expected text. The model name comes from `/v1/models`; builds without the
plain completions route are asked through chat completions.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Mapping, Sequence
from typing import Any

from console.transport import http
from console.transport.ssh import HostSession

_REFERENCE = re.compile(r"^\$(?:\{(\w+)\}|(\w+))$")


def server_api_key(argv: Sequence[str], environment: Mapping[str, str]) -> str | None:
    """The key the server demands: its `--api-key` argument, a `$VAR` / `${VAR}` in it
    resolved from the unit's Environment= (systemd expands those in ExecStart=)."""
    value: str | None = None
    for i, word in enumerate(argv):
        if word == "--api-key" and i + 1 < len(argv):
            value = argv[i + 1]
        elif word.startswith("--api-key="):
            value = word.partition("=")[2]
    if value is None:
        return None
    reference = _REFERENCE.match(value)
    if reference is not None:
        return environment.get(reference.group(1) or reference.group(2))
    return value or None


async def smoke_completion(session: HostSession, api_key: str | None = None) -> str:
    """The profile's smoke prompt at temperature 0: `/v1/completions`, else chat completions.

    `api_key`: the server's own (`server_api_key`), sent as `Authorization: Bearer`."""
    service = session.profile.service
    smoke = service.smoke
    model = "default"
    models = await http.request(session, service.port, "GET", "/v1/models", api_key=api_key)
    if models.status == 200:
        with contextlib.suppress(http.HttpError, LookupError, TypeError, AttributeError):
            model = str(models.json()["data"][0]["id"])
    body: dict[str, Any] = {
        "model": model,
        "prompt": smoke.prompt,
        "max_tokens": smoke.max_tokens,
        "temperature": 0,
    }
    response = await http.request(
        session, service.port, "POST", "/v1/completions", body=body, timeout=120, api_key=api_key
    )
    chat = response.status == 404
    if chat:
        del body["prompt"]
        body["messages"] = [{"role": "user", "content": smoke.prompt}]
        response = await http.request(
            session,
            service.port,
            "POST",
            "/v1/chat/completions",
            body=body,
            timeout=120,
            api_key=api_key,
        )
    if response.status != 200:
        raise http.HttpError(f"HTTP {response.status}: {response.body[:200]!r}")
    try:
        choice = response.json()["choices"][0]
        text = choice["message"]["content"] if chat else choice["text"]
    except (LookupError, TypeError) as exc:
        raise http.HttpError(f"unexpected completion response: {exc!r}") from None
    return str(text)
