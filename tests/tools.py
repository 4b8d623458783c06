"""External programs some tests need (promtool, prometheus, ansible-inventory): a test that
cannot find one is skipped with a reason tests/conftest.py repeats in capitals at the end."""

from __future__ import annotations

import pytest

MISSING = "NOT INSTALLED"
"""In every such skip reason; the run's summary counts them."""


def needs(program: str | None, name: str, install: str) -> pytest.MarkDecorator:
    """Skip unless `program` (a path found by the caller, or None) is there."""
    return pytest.mark.skipif(
        program is None, reason=f"{name.upper()} {MISSING}: {install.upper()} INSTALLS IT"
    )
