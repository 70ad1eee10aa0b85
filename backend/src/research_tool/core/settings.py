"""Configuration from the environment (RESEARCH_* and the providers' own key names) or a `.env` file."""

from __future__ import annotations

import json
import os
from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

PROVIDER_NAMES: tuple[str, ...] = (
    "tavily",
    "exa",
    "brave",
    "semantic_scholar",
    "arxiv",
    "pubmed",
    "unpaywall",
    "wikipedia",
    "duckduckgo",
    "local",
    "crawler",
)


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="RESEARCH_", env_file=".env", extra="ignore", populate_by_name=True)

    data_dir: Path = Path("./data")
    # Storage backend: unset keeps everything in SQLite files under data_dir; a postgresql:// (or postgres://)
    # URL puts sessions, events, checkpoints, page texts and provider memory in Postgres (the `postgres` extra).
    # Left out of the settings' repr: the URL may carry a password.
    database_url: str | None = Field(default=None, repr=False)
    # Connections of the process's Postgres pool (every store and the checkpointer share it).
    database_pool_size: int = Field(default=10, ge=1, le=1000)
    llm: str = "offline"
    log_format: Literal["json", "console"] = "console"
    log_level: str = "INFO"
    # OpenTelemetry (core/telemetry.py; on when OTEL_EXPORTER_OTLP_ENDPOINT is set): spans carry the question,
    # the model's prompts and answers and the fetched URLs only when this is on (otherwise a hash of the question).
    trace_content: bool = False

    # Tier overrides (None: the tier's own value) and guards.
    max_iters: int | None = Field(default=None, ge=1, le=50)
    max_queries: int | None = Field(default=None, ge=1, le=100)
    max_sources: int | None = Field(default=None, ge=1, le=200)
    max_execution_time_s: float | None = Field(default=None, gt=0)
    token_budget: int = Field(default=200_000, ge=1)
    provider_call_budget: int = Field(default=300, ge=1)
    search_concurrency: int = Field(default=8, ge=1, le=64)
    # Requests of one provider endpoint in flight at once, process-wide; the rest wait at the endpoint's gate.
    # 256: a provider that answers in 1 s still serves 256 requests a second (64 capped the scale benchmark's
    # server at 96 sessions a minute with half a core idle); a provider's rate limit binds long before.
    provider_max_in_flight: int = Field(default=256, ge=1, le=1024)
    # Each provider's rate limit and circuit breaker shared by every process through this Redis (None: per
    # process, in memory). Keys start with `redis_prefix`, so deployments (or test runs) on one Redis stay apart.
    redis_url: str | None = Field(default=None, pattern=r"^(redis|rediss|unix)://")
    redis_prefix: str = Field(default="research-tool", min_length=1, max_length=100)

    # Server.
    # Sessions running at once; the rest wait in the queue (RESEARCH_MAX_QUEUED_SESSIONS), and a start beyond
    # that is refused with 503 + Retry-After.
    max_concurrent_sessions: int = Field(default=32, ge=1, le=1000)
    max_queued_sessions: int = Field(default=2000, ge=0, le=100_000)
    # Cluster mode (RESEARCH_DATABASE_URL): a worker holds a lease on each session it runs for this long and
    # renews it every third of it; a worker that dies (kill -9) loses its sessions to another worker after at most
    # this long. Workers also look for claimable sessions every RESEARCH_WORKER_POLL_S besides being woken.
    lease_ttl_s: float = Field(default=15.0, ge=1.0, le=3600)
    worker_poll_s: float = Field(default=3.0, gt=0, le=600)
    # Whether `research-tool serve` also runs sessions (a worker in the API process); `serve --no-worker` sets
    # it false. Only cluster mode can run without one: an embedded (SQLite) server always runs its sessions.
    run_worker: bool = True
    clarify_timeout_s: float = Field(default=600.0, gt=0)
    api_token: SecretStr | None = None
    # Per-user limits (docs/api.md, "Users"): unfinished sessions at once, and sessions started per UTC day, for
    # each named user (the keys of `research-tool users add`, RESEARCH_API_TOKEN's `admin`, a RESEARCH_AUTH
    # identity). None: no limit. The local single user (no key, no users) has none.
    user_max_concurrent_sessions: int | None = Field(default=None, ge=1, le=100_000)
    user_max_sessions_per_day: int | None = Field(default=None, ge=1, le=10_000_000)
    # Model tokens per UTC day per named user: a start is admitted only while the tokens the user's sessions
    # spent today plus RESEARCH_TOKEN_BUDGET for each unfinished one (the new one included) stay within it.
    user_max_tokens_per_day: int | None = Field(default=None, ge=1)
    # USD per million tokens by model (`{"gpt-4o-mini": 0.3, "anthropic:claude-haiku-4-5": 2.0}`), inline JSON or a
    # path to a JSON file: a report of such a model gets `metadata.cost_usd`.
    price_table: str | None = None
    # LangGraph custom auth: `module.path:auth` (or `path/to/file.py:auth`) naming a langgraph_sdk.Auth object
    # (api/custom_auth.py); unset, the `auth.path` of ./langgraph.json is used when there is one.
    auth: str | None = None
    cors_origins: str = ""
    # Host names the server answers to besides localhost and its bound address (DNS-rebinding guard):
    # comma-separated, `*.example.org` wildcards, `*` for any (behind a proxy that checks Host).
    allowed_hosts: str = ""
    # Slow and numerous clients: request headers must arrive within this many seconds of the connection
    # (or of the previous response); connections over the limit are closed at once (runtime/http_server.py).
    header_timeout_s: float = Field(default=10.0, gt=0, le=600)
    # None: half the process's file-descriptor limit, at most 4,096 (runtime/http_server.connection_limit).
    max_connections: int | None = Field(default=None, ge=1, le=100_000)
    # With no api_token: a WebSocket that carried no message either way for this long is closed (1001 "idle").
    ws_idle_timeout_s: float = Field(default=300.0, gt=0, le=86_400)
    max_request_bytes: int = 64 * 1024
    run_timeout_s: float = Field(default=600.0, gt=0)
    # Finished sessions last updated longer ago than this are deleted (`research-tool gc`, and the server
    # every hour); None keeps everything.
    retention_days: float | None = Field(default=None, gt=0)
    # Processes for the engines' CPU-bound text work in the server (0: threads of the server process).
    cpu_workers: int = Field(default_factory=lambda: min(2, os.cpu_count() or 1), ge=0, le=64)
    # How much lower the CPU workers' scheduling priority is than the server's (os.nice increment; 0: the same).
    cpu_worker_niceness: int = Field(default=5, ge=0, le=19)

    # Engines.
    verify_citations: Literal["existence", "semantic"] = "existence"
    # The answer reader's graph (providers/local_corpus/reader.py reads the variable itself, in every process):
    # named here so that any other value stops the CLI and the server at start (exit 2) instead of being ignored.
    answer_reader_variant: Literal["fp32", "int8"] = "fp32"
    llm_timeout_s: float = Field(default=300.0, gt=0)  # one model call (connect: 5 s)
    # a local model server whose prompt speed is not known yet is measured at preflight with a short prompt
    llm_speed_probe: bool = True
    llm_context_tokens: int = Field(default=16_384, ge=2048)  # Ollama num_ctx (its default truncates prompts)
    # How JSON answers are asked for (docs/models.md): auto detects the strongest form per server and remembers it.
    llm_structured_output: Literal["auto", "json_schema", "json_object", "ollama", "prompt"] = "auto"
    ollama_base_url: str = Field(
        default="http://localhost:11434", validation_alias=AliasChoices("OLLAMA_BASE_URL", "RESEARCH_OLLAMA_BASE_URL")
    )
    openai_base_url: str | None = Field(default=None, validation_alias="OPENAI_BASE_URL")
    openai_api_key: SecretStr | None = Field(default=None, validation_alias="OPENAI_API_KEY")
    anthropic_api_key: SecretStr | None = Field(default=None, validation_alias="ANTHROPIC_API_KEY")

    # Local documents (paths joined by os.pathsep).
    corpus_dirs: str = ""
    # A local file larger than this is skipped by the index, with a warning (docs/local-folders-and-untrusted-text.md).
    corpus_max_file_mb: float = Field(default=10.0, gt=0, le=4096)
    # RESEARCH_SEMANTIC_SEARCH=1 (the `semantic` extra): folders indexed from now on also get dense vectors, and
    # their searches mix BM25 with them (docs/semantic-search.md). Folders that have vectors keep them either way.
    # With the LLM engine, a fetched page longer than its source block keeps its passages nearest the question.
    semantic_search: bool = False

    # Provider keys, under the providers' own names.
    tavily_api_key: SecretStr | None = Field(default=None, validation_alias="TAVILY_API_KEY")
    exa_api_key: SecretStr | None = Field(default=None, validation_alias="EXA_API_KEY")
    brave_api_key: SecretStr | None = Field(default=None, validation_alias="BRAVE_API_KEY")
    semantic_scholar_api_key: SecretStr | None = Field(default=None, validation_alias="SEMANTIC_SCHOLAR_API_KEY")
    ncbi_api_key: SecretStr | None = Field(default=None, validation_alias="NCBI_API_KEY")
    unpaywall_email: str | None = Field(default=None, validation_alias="UNPAYWALL_EMAIL")

    # Per-provider base URL and rate: RESEARCH_<NAME>_BASE_URL, RESEARCH_<NAME>_RPS.
    tavily_base_url: str | None = None
    tavily_rps: float | None = Field(default=None, gt=0)
    exa_base_url: str | None = None
    exa_rps: float | None = Field(default=None, gt=0)
    brave_base_url: str | None = None
    brave_rps: float | None = Field(default=None, gt=0)
    semantic_scholar_base_url: str | None = None
    semantic_scholar_rps: float | None = Field(default=None, gt=0)
    arxiv_base_url: str | None = None
    arxiv_rps: float | None = Field(default=None, gt=0)
    pubmed_base_url: str | None = None
    pubmed_rps: float | None = Field(default=None, gt=0)
    unpaywall_base_url: str | None = None
    unpaywall_rps: float | None = Field(default=None, gt=0)
    wikipedia_base_url: str | None = None
    wikipedia_rps: float | None = Field(default=None, gt=0)
    duckduckgo_base_url: str | None = None
    duckduckgo_rps: float | None = Field(default=None, gt=0)
    local_base_url: str | None = None
    local_rps: float | None = Field(default=None, gt=0)
    crawler_base_url: str | None = None
    crawler_rps: float | None = Field(default=None, gt=0)

    def provider_base_url(self, name: str, default: str) -> str:
        value = getattr(self, f"{name}_base_url", None)
        return (value or default).rstrip("/")

    def provider_rps(self, name: str, default: float) -> float:
        value = getattr(self, f"{name}_rps", None)
        return float(value) if value else default

    @property
    def corpus_max_file_bytes(self) -> int:
        return int(self.corpus_max_file_mb * 1024 * 1024)

    def corpus_paths(self) -> list[Path]:
        return [Path(p) for p in self.corpus_dirs.split(os.pathsep) if p.strip()]

    @field_validator("database_url")
    @classmethod
    def _postgres_url(cls, value: str | None) -> str | None:
        """Empty means unset; postgres:// is accepted as libpq does and written as postgresql://."""
        if value is None or not value.strip():
            return None
        value = value.strip()
        if value.startswith("postgres://"):
            value = "postgresql://" + value.removeprefix("postgres://")
        if not value.startswith("postgresql://"):
            raise ValueError("RESEARCH_DATABASE_URL must be a postgresql:// URL")
        return value

    @property
    def uses_postgres(self) -> bool:
        """True when RESEARCH_DATABASE_URL names a Postgres database (the storage backend is Postgres)."""
        return bool(self.database_url)

    def db_path(self, name: str) -> Path:
        """Path of one of the SQLite files under the data dir (created on demand)."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        return self.data_dir / name


def price_per_million(settings: Settings, model: str) -> float | None:
    """RESEARCH_PRICE_TABLE's USD per million tokens for `model` (its name, or RESEARCH_LLM's `provider:model`);
    None when there is no table, it is unreadable, or it does not price the model."""
    text = (settings.price_table or "").strip()
    if not text:
        return None
    try:
        table = json.loads(text if text.startswith("{") else Path(text).expanduser().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(table, dict):
        return None
    for key in (model, settings.llm):
        price = table.get(key)
        if isinstance(price, int | float) and not isinstance(price, bool) and price >= 0:
            return float(price)
    return None


def secret_value(secret: SecretStr | None) -> str | None:
    """The plain text of a key or token setting (None when unset or empty), for the one place it is sent.

    Keys and the API token are `SecretStr`: printing, logging or dumping the settings shows `**********`.
    """
    value = secret.get_secret_value() if secret is not None else ""
    return value or None


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()


def reset_settings_cache() -> None:
    """Tests and the CLI change the environment; this makes the next get_settings() re-read it."""
    get_settings.cache_clear()
