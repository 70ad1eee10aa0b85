"""Suite-wide isolation, in one fixture: process-wide state is reset around every test, and nothing from the
developer's environment (keys, tokens, model or provider endpoints) reaches the code under test."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from research_tool.core.settings import PROVIDER_NAMES, reset_settings_cache
from research_tool.providers.local_corpus.onnx_encoder import ENCODER_CACHE_ENV
from research_tool.providers.resilience.circuit_breaker import CIRCUIT_BREAKERS
from research_tool.providers.resilience.rate_limiter import RATE_LIMITERS

# Variables that would send a test's requests to a real service or with a real credential.
FOREIGN_ENV: tuple[str, ...] = (
    "TAVILY_API_KEY",
    "EXA_API_KEY",
    "BRAVE_API_KEY",
    "SEMANTIC_SCHOLAR_API_KEY",
    "NCBI_API_KEY",
    "UNPAYWALL_EMAIL",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "ANTHROPIC_API_KEY",
    "OLLAMA_BASE_URL",
    "OLLAMA_HOST",
    "OLLAMA_API_KEY",
    "RESEARCH_API_TOKEN",
    "RESEARCH_LLM",
    "RESEARCH_OLLAMA_BASE_URL",
    "RESEARCH_SEMANTIC_SEARCH",
    "RESEARCH_ENCODER_DIR",
    "RESEARCH_ENCODER_RUNTIME",
    *(f"RESEARCH_{name.upper()}_BASE_URL" for name in PROVIDER_NAMES),
    *(f"RESEARCH_{name.upper()}_RPS" for name in PROVIDER_NAMES),
    # a developer's own OpenTelemetry endpoint must not turn tracing on in tests (tests/telemetry/ set their own)
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_SDK_DISABLED",
    "OTEL_TRACES_EXPORTER",
    "OTEL_TRACES_SAMPLER",
    "OTEL_SERVICE_NAME",
)


def reset_process_state() -> None:
    """Rate limiters and circuit breakers are process-wide by design (every session shares a provider's
    budget), and get_settings() caches the environment: a test starts and ends with none of them."""
    RATE_LIMITERS.clear()
    CIRCUIT_BREAKERS.clear()
    reset_settings_cache()


@pytest.fixture(scope="session")
def built_models(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One folder for the ONNX models the sentence encoder builds, shared by a session's tests: never the
    user's cache folder."""
    return tmp_path_factory.mktemp("encoder-models")


@pytest.fixture(autouse=True)
def isolated_process(monkeypatch: pytest.MonkeyPatch, built_models: Path) -> Iterator[None]:
    for name in FOREIGN_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(ENCODER_CACHE_ENV, str(built_models))
    reset_process_state()
    yield
    reset_process_state()


def pytest_configure(config: pytest.Config) -> None:
    """A suite started as a background job of a non-interactive shell (`make test &`) inherits SIGINT ignored,
    and every process it starts would too: the tests that press Ctrl-C on a CLI process would then see it
    ignored. A handled SIGINT here resets to the default in each child at exec."""
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
