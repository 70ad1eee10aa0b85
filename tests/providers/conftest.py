"""Fixtures for the provider tests: a replay server per test, the shared HTTP client, clean
process-wide limiters and breakers, and Settings pointed at the replay server."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from research_tool.core.settings import PROVIDER_NAMES, Settings
from research_tool.providers.http_client import create_http_client
from research_tool.providers.resilience.circuit_breaker import CIRCUIT_BREAKERS
from research_tool.providers.resilience.rate_limiter import RATE_LIMITERS

from .replay import ReplayServer

KEY_ENV = (
    "TAVILY_API_KEY",
    "EXA_API_KEY",
    "BRAVE_API_KEY",
    "SEMANTIC_SCHOLAR_API_KEY",
    "NCBI_API_KEY",
    "UNPAYWALL_EMAIL",
)


@pytest.fixture(autouse=True)
def clean_process_state(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Limiters and breakers are process-wide on purpose; each test starts from fresh ones, and no
    key or base URL from the developer's environment leaks in."""
    for name in KEY_ENV:
        monkeypatch.delenv(name, raising=False)
    for name in PROVIDER_NAMES:
        monkeypatch.delenv(f"RESEARCH_{name.upper()}_BASE_URL", raising=False)
        monkeypatch.delenv(f"RESEARCH_{name.upper()}_RPS", raising=False)
    RATE_LIMITERS.clear()
    CIRCUIT_BREAKERS.clear()
    yield
    RATE_LIMITERS.clear()
    CIRCUIT_BREAKERS.clear()


@pytest.fixture
def replay() -> Iterator[ReplayServer]:
    with ReplayServer() as server:
        yield server


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    http = create_http_client()
    try:
        yield http
    finally:
        await http.aclose()


@pytest.fixture
def make_settings(tmp_path: Path, replay: ReplayServer) -> Callable[..., Settings]:
    """Settings with every provider's base URL on the replay server and a fast rate, overridable."""

    def build(**overrides: Any) -> Settings:
        values: dict[str, Any] = {"data_dir": tmp_path / "data"}
        for name in PROVIDER_NAMES:
            values[f"{name}_base_url"] = replay.base_url
            values[f"{name}_rps"] = 50.0
        values.update(overrides)
        return Settings(**values)

    return build
