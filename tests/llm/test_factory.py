"""RESEARCH_LLM parsing, privacy enforcement, and the preflight that never hangs."""

from __future__ import annotations

import time

import pytest

from research_tool.core.errors import BadInputError, EngineUnavailableError
from research_tool.core.settings import Settings
from research_tool.engines.factory import create_engine, endpoint_is_local, parse_model_spec
from research_tool.engines.llm import LLMEngine

from .conftest import llm_settings
from .fallback_engine import RecordingFallback
from .servers import OllamaServer, OpenAIServer, unused_port

PUBLIC = "http://8.8.8.8/v1"


@pytest.mark.parametrize(
    ("spec", "provider", "model"),
    [
        ("ollama:llama3.1:8b", "ollama", "llama3.1:8b"),
        ("openai:gpt-4o-mini", "openai", "gpt-4o-mini"),
        ("Anthropic:claude-sonnet-4-5", "anthropic", "claude-sonnet-4-5"),
        ("openai:org/model-name", "openai", "org/model-name"),
    ],
)
def test_model_specs_parse(spec: str, provider: str, model: str) -> None:
    parsed = parse_model_spec(spec)
    assert parsed is not None and (parsed.provider, parsed.model) == (provider, model)


def test_offline_is_no_model() -> None:
    assert parse_model_spec("offline") is None and parse_model_spec(" OFFLINE ") is None


@pytest.mark.parametrize("spec", ["", "gpt-4o", "openai:", "mistral:7b", "ollama:llama 3", ":llama3"])
def test_malformed_specs_are_bad_input(spec: str) -> None:
    with pytest.raises(BadInputError, match="RESEARCH_LLM"):
        create_engine(Settings(_env_file=None, llm=spec), privacy_mode="cloud_allowed")  # type: ignore[call-arg]


def test_openai_with_a_public_base_url_is_bad_input_under_local_only() -> None:
    settings = llm_settings("openai", PUBLIC)
    with pytest.raises(BadInputError, match=r"OPENAI_BASE_URL=http://8\.8\.8\.8/v1 is not a loopback or private"):
        create_engine(settings, privacy_mode="local_only")


def test_openai_without_a_base_url_is_bad_input_under_hybrid() -> None:
    settings = Settings(_env_file=None, llm="openai:gpt-4o-mini", openai_api_key="sk-x")  # type: ignore[call-arg]
    with pytest.raises(BadInputError, match=r"api\.openai\.com"):
        create_engine(settings, privacy_mode="hybrid")


def test_anthropic_is_bad_input_under_local_privacy() -> None:
    settings = Settings(_env_file=None, llm="anthropic:claude-x", anthropic_api_key="k")  # type: ignore[call-arg]
    with pytest.raises(BadInputError, match="Anthropic's cloud"):
        create_engine(settings, privacy_mode="local_only")


def test_ollama_on_a_public_host_is_bad_input_under_hybrid() -> None:
    with pytest.raises(BadInputError, match="OLLAMA_BASE_URL"):
        create_engine(llm_settings("ollama", "http://8.8.8.8:11434"), privacy_mode="hybrid")


@pytest.mark.slow
def test_cloud_allowed_accepts_public_and_cloud_models() -> None:
    engine = create_engine(llm_settings("openai", PUBLIC), privacy_mode="cloud_allowed")
    assert isinstance(engine, LLMEngine) and engine.model == "openai:test-model" and engine.name == "llm"
    settings = Settings(_env_file=None, llm="anthropic:claude-x", anthropic_api_key="k")  # type: ignore[call-arg]
    assert create_engine(settings, privacy_mode="cloud_allowed").model == "anthropic:claude-x"


def test_missing_keys_are_a_clear_error() -> None:
    with pytest.raises(EngineUnavailableError, match="OPENAI_API_KEY"):
        create_engine(Settings(_env_file=None, llm="openai:gpt-4o"), privacy_mode="cloud_allowed")  # type: ignore[call-arg]
    with pytest.raises(EngineUnavailableError, match="ANTHROPIC_API_KEY"):
        create_engine(Settings(_env_file=None, llm="anthropic:c"), privacy_mode="cloud_allowed")  # type: ignore[call-arg]


@pytest.mark.parametrize(
    ("url", "local"),
    [
        ("http://127.0.0.1:11434", True),
        ("http://localhost:8000/v1", True),
        ("http://10.1.2.3:8000/v1", True),
        ("http://192.168.1.20", True),
        ("http://[::1]:11434", True),
        ("http://gpu-box.local:8000/v1", True),
        ("http://8.8.8.8", False),
        ("http://[::ffff:8.8.8.8]", False),
        ("not a url", False),
    ],
)
def test_endpoint_locality(url: str, local: bool) -> None:
    assert endpoint_is_local(url) is local


def test_offline_spec_returns_the_offline_engine() -> None:
    fallback = RecordingFallback()
    settings = Settings(_env_file=None, llm="offline")  # type: ignore[call-arg]
    assert create_engine(settings, privacy_mode="local_only", fallback=fallback) is fallback


async def test_ollama_with_nothing_listening_fails_clearly_within_seconds() -> None:
    base_url = f"http://127.0.0.1:{unused_port()}"
    engine = create_engine(llm_settings("ollama", base_url), privacy_mode="local_only", fallback=RecordingFallback())
    assert isinstance(engine, LLMEngine)
    started = time.monotonic()
    with pytest.raises(EngineUnavailableError) as caught:
        await engine.check()
    assert time.monotonic() - started < 10  # the "within seconds", with ample tolerance
    message = str(caught.value)
    assert f"cannot reach Ollama at {base_url}" in message and "connection refused" in message
    assert "RESEARCH_LLM=offline" in message
    await engine.aclose()


async def test_steps_with_nothing_listening_degrade_and_stop_calling() -> None:
    fallback = RecordingFallback()
    base_url = f"http://127.0.0.1:{unused_port()}"
    engine = create_engine(llm_settings("ollama", base_url), privacy_mode="local_only", fallback=fallback)
    assert isinstance(engine, LLMEngine)
    steps = [await engine.apply_answers("q", ["which?"], ["this"]) for _ in range(4)]
    assert fallback.calls == ["apply_answers"] * 4
    assert all(s.errors[0].error.type == "engine_unavailable" for s in steps)
    assert "failed 3 times in a row" in steps[3].errors[0].error.message  # the fourth was never sent
    await engine.aclose()


async def test_ollama_preflight_names_a_missing_model(ollama_server: OllamaServer) -> None:
    ollama_server.models = ["llama3.1:8b"]
    engine = create_engine(llm_settings("ollama", ollama_server.base_url), privacy_mode="local_only")
    assert isinstance(engine, LLMEngine)
    with pytest.raises(EngineUnavailableError, match="ollama pull test-model"):
        await engine.check()
    ollama_server.models = ["test-model:latest"]
    await engine.check()
    await engine.aclose()


async def test_openai_preflight(openai_server: OpenAIServer) -> None:
    engine = create_engine(llm_settings("openai", openai_server.base_url), privacy_mode="hybrid")
    assert isinstance(engine, LLMEngine)
    await engine.check()
    down = create_engine(llm_settings("openai", f"http://127.0.0.1:{unused_port()}/v1"), privacy_mode="hybrid")
    assert isinstance(down, LLMEngine)
    with pytest.raises(EngineUnavailableError, match="OpenAI-compatible server"):
        await down.check()
    await engine.aclose()
    await down.aclose()


def test_check_engine_settings_validates_without_building_a_client() -> None:
    from research_tool.engines.factory import check_engine_settings

    assert check_engine_settings(Settings(_env_file=None, llm="offline"), privacy_mode="local_only") is None  # type: ignore[call-arg]
    spec = check_engine_settings(llm_settings("ollama", "http://127.0.0.1:11434"), privacy_mode="local_only")
    assert spec is not None and str(spec) == "ollama:test-model"
    with pytest.raises(BadInputError):
        check_engine_settings(llm_settings("openai", PUBLIC), privacy_mode="local_only")
