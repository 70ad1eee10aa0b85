"""LLM engine tests: scripted OpenAI and Ollama protocol servers on 127.0.0.1 driving the real clients."""

from __future__ import annotations

import tempfile
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import structlog

from research_tool.core.logging import configure_logging
from research_tool.core.settings import Settings
from research_tool.engines.factory import create_engine
from research_tool.engines.llm import LLMEngine

from .fallback_engine import RecordingFallback
from .servers import OllamaServer, OpenAIServer, ScriptedChatServer


@pytest.fixture(autouse=True)
def _logs_to_this_tests_stderr() -> Iterator[None]:
    """The engine logs every retry and fallback; a logger configured by an earlier test may still hold that
    test's (closed) captured stderr, so point logging at this test's stderr and restore it afterwards."""
    saved = structlog.get_config()
    configure_logging("console", "INFO")
    yield
    structlog.configure(**saved)


def llm_settings(kind: str, base_url: str, **overrides: object) -> Settings:
    """Settings for `openai:test-model` or `ollama:test-model` at `base_url` (no .env file read)."""
    values: dict[str, object] = {"llm": f"{kind}:test-model"}
    if kind == "openai":
        values |= {"openai_base_url": base_url, "openai_api_key": "sk-test"}
    else:
        values |= {"ollama_base_url": base_url}
    values |= overrides
    # a data dir of its own: the engine keeps each server's prompt speed there (engines/prompt_timing.py), and a
    # test must neither write into the checkout's ./data nor start from a speed another test kept
    values.setdefault("data_dir", Path(tempfile.mkdtemp(prefix="llm-test-data-")))
    # no speed probe at preflight unless a test asks for it: the scripted servers' request lists stay the steps'
    values.setdefault("llm_speed_probe", False)
    return Settings(_env_file=None, **values)  # type: ignore[call-arg]


@dataclass
class Harness:
    kind: str
    server: ScriptedChatServer
    engine: LLMEngine
    fallback: RecordingFallback


@pytest.fixture
def openai_server() -> Iterator[OpenAIServer]:
    with OpenAIServer() as server:
        yield server  # type: ignore[misc]


@pytest.fixture
def ollama_server() -> Iterator[OllamaServer]:
    with OllamaServer() as server:
        yield server  # type: ignore[misc]


@pytest.fixture(params=["openai", "ollama"])
async def harness(request: pytest.FixtureRequest) -> AsyncIterator[Harness]:
    """An LLM engine built by the factory, talking to a scripted server of either protocol."""
    server: ScriptedChatServer = OpenAIServer() if request.param == "openai" else OllamaServer()
    server.start()
    fallback = RecordingFallback()
    engine = create_engine(llm_settings(request.param, server.base_url), privacy_mode="local_only", fallback=fallback)
    assert isinstance(engine, LLMEngine)
    try:
        yield Harness(kind=request.param, server=server, engine=engine, fallback=fallback)
    finally:
        await engine.aclose()
        server.stop()
