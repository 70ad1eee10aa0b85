"""Suite-wide isolation: rate limiters and circuit breakers are process-wide by design, so each test
starts with fresh ones (a breaker opened by one test must not refuse the next test's requests)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from research_tool.providers.resilience.circuit_breaker import CIRCUIT_BREAKERS
from research_tool.providers.resilience.rate_limiter import RATE_LIMITERS


@pytest.fixture(autouse=True)
def fresh_limits_and_breakers() -> Iterator[None]:
    RATE_LIMITERS.clear()
    CIRCUIT_BREAKERS.clear()
    yield
    RATE_LIMITERS.clear()
    CIRCUIT_BREAKERS.clear()
