"""Which endpoint says "ready" on each SGLang release."""

from __future__ import annotations

import pytest

from console.service.health import health_is_liveness, readiness_path, server_info_path


@pytest.mark.parametrize(
    ("version", "path"),
    [
        ("0.3.6", "/health_generate"),
        ("0.4.10", "/health_generate"),
        ("0.5.3", "/health"),
        ("0.5.23", "/health"),
        ("0.5.9-ddtree", "/health"),
        (None, "/health"),
    ],
)
def test_readiness_uses_health_generate_where_health_is_only_liveness(
    version: str | None, path: str
) -> None:
    assert readiness_path(version, "/health") == path


def test_a_profiles_own_health_path_is_kept() -> None:
    assert readiness_path("0.4.10", "/ready") == "/ready"
    assert health_is_liveness("0.4.10") and not health_is_liveness("0.5.3")


@pytest.mark.parametrize(
    ("version", "path"),
    [
        ("0.3.6", None),
        ("0.4.1", "/get_server_info"),
        ("0.5.5", "/get_server_info"),
        ("0.5.6", "/server_info"),
        ("0.5.10", "/server_info"),
        ("0.5.23", "/server_info"),
    ],
)
def test_server_info_moved_in_0_5_6(version: str, path: str | None) -> None:
    assert server_info_path(version) == path
