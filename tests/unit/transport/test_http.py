"""The HTTP/1.0 client's wire format: requests that cannot smuggle headers, tolerant parsing."""

from __future__ import annotations

import json

import pytest

from console.transport.http import HttpError, build_request, parse_response


def test_get_request_is_plain_http_1_0_with_connection_close() -> None:
    raw = build_request("GET", "/health", 30001)
    assert raw == (
        b"GET /health HTTP/1.0\r\nHost: 127.0.0.1:30001\r\nConnection: close\r\n"
        b"Accept: application/json\r\n\r\n"
    )


def test_post_carries_a_json_body_with_its_length() -> None:
    raw = build_request("POST", "/v1/completions", 30001, {"prompt": "2+2=", "temperature": 0})
    head, _, body = raw.partition(b"\r\n\r\n")
    assert json.loads(body) == {"prompt": "2+2=", "temperature": 0}
    assert f"Content-Length: {len(body)}".encode() in head
    assert b"Content-Type: application/json" in head


@pytest.mark.parametrize("path", ["health", "/a b", "/x\r\nEvil: 1", "/ü"])
def test_paths_that_could_inject_are_refused(path: str) -> None:
    with pytest.raises(ValueError):
        build_request("GET", path, 1)


def test_response_status_headers_and_body() -> None:
    response = parse_response(
        b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
        b'Content-Length: 21\r\n\r\n{"error": "starting"}trailing'
    )
    assert response.status == 503 and response.reason == "Service Unavailable"
    assert response.headers["content-type"] == "application/json"
    assert response.json() == {"error": "starting"}


def test_truncated_or_foreign_responses_are_errors() -> None:
    with pytest.raises(HttpError, match="before the response headers ended"):
        parse_response(b"HTTP/1.1 200 OK\r\nContent-")
    with pytest.raises(HttpError, match="not an HTTP response"):
        parse_response(b"SSH-2.0-OpenSSH\r\n\r\n")
    with pytest.raises(HttpError, match="not JSON"):
        parse_response(b"HTTP/1.0 200 OK\r\n\r\n<html>").json()
