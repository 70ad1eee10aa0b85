"""Where a benchmark's research runs look for providers: the replay servers on 127.0.0.1, every other
provider at a closed loopback port (so nothing can leave the machine), the offline engine, and the
rates the benchmark chose. One description, two forms: Settings for in-process runs, an environment
for a uvicorn subprocess."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from research_tool.core.settings import PROVIDER_NAMES, Settings

CLOSED_PORT_URL = "http://127.0.0.1:9"  # the discard port: nothing listens, connections are refused at once
# Keys and settings from the developer's environment that would change what a benchmark measures.
FOREIGN_ENV = (
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
)


@dataclass(frozen=True)
class ReplayProvider:
    """A provider answered by a replay server at `base_url`, allowed `rps` requests per second."""

    name: str
    base_url: str
    rps: float


@dataclass(frozen=True)
class BenchEnvironment:
    data_dir: Path
    providers: tuple[ReplayProvider, ...]
    max_concurrent_sessions: int | None = 3  # None: the server's default
    extra: dict[str, Any] = field(default_factory=dict)  # further Settings fields (RESEARCH_<NAME>)

    @property
    def provider_names(self) -> list[str]:
        return [p.name for p in self.providers]

    def settings_values(self) -> dict[str, Any]:
        values: dict[str, Any] = {f"{name}_base_url": CLOSED_PORT_URL for name in PROVIDER_NAMES if name != "local"}
        for provider in self.providers:
            values[f"{provider.name}_base_url"] = provider.base_url
            values[f"{provider.name}_rps"] = provider.rps
        values.update(data_dir=self.data_dir, llm="offline", log_level="WARNING")
        if self.max_concurrent_sessions is not None:
            values["max_concurrent_sessions"] = self.max_concurrent_sessions
        values.update(self.extra)
        return values

    def settings(self) -> Settings:
        return Settings(_env_file=None, **self.settings_values())

    def process_env(self) -> dict[str, str]:
        """The environment of a server subprocess: this one without RESEARCH_* and provider keys, plus ours."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("RESEARCH_") and k not in FOREIGN_ENV}
        for key, value in self.settings_values().items():
            env[f"RESEARCH_{key.upper()}"] = str(value)
        return env
