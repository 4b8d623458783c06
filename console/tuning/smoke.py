"""The smoke completion: one deterministic prompt a healthy server must answer correctly.

`/health` only says the server is up. The DDTree budget-32 bug served garbage while healthy,
so a change is only kept once the profile's prompt (`2+2=` at temperature 0) comes back
containing the expected text. The model name comes from `/v1/models`; builds without the
plain completions route are asked through chat completions.
"""

from __future__ import annotations

import contextlib
from typing import Any

from console.transport import http
from console.transport.ssh import HostSession


async def smoke_completion(session: HostSession) -> str:
    """The profile's smoke prompt at temperature 0: `/v1/completions`, else chat completions."""
    service = session.profile.service
    smoke = service.smoke
    model = "default"
    models = await http.request(session, service.port, "GET", "/v1/models")
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
        session, service.port, "POST", "/v1/completions", body=body, timeout=120
    )
    chat = response.status == 404
    if chat:
        del body["prompt"]
        body["messages"] = [{"role": "user", "content": smoke.prompt}]
        response = await http.request(
            session, service.port, "POST", "/v1/chat/completions", body=body, timeout=120
        )
    if response.status != 200:
        raise http.HttpError(f"HTTP {response.status}: {response.body[:200]!r}")
    try:
        choice = response.json()["choices"][0]
        text = choice["message"]["content"] if chat else choice["text"]
    except (LookupError, TypeError) as exc:
        raise http.HttpError(f"unexpected completion response: {exc!r}") from None
    return str(text)
