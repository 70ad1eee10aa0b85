"""Fixtures for the provider tests: a replay server per test, the shared HTTP client, and Settings pointed
at the replay server (tests/conftest.py resets the process-wide limiters and breakers)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from research_tool.core.settings import PROVIDER_NAMES, Settings
from research_tool.providers.http_client import create_http_client

from .replay import ReplayServer


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
