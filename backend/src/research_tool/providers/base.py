"""The interface every search provider implements (DESIGN §4)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar, Literal

import httpx
from pydantic import SecretStr

from research_tool.core.settings import Settings, secret_value
from research_tool.models.entities import SourceResult

Privacy = Literal["local", "cloud"]
SourceKind = Literal["web", "academic", "local", "encyclopedia"]


class SearchProvider(ABC):
    """One search backend. Stateless apart from its settings and the shared HTTP client.

    Rate limiting, retries and circuit breaking are not the provider's business: the gateway
    (providers.gateway) wraps every call. `search` raises the ProviderError subclasses of
    core.errors for failures and returns [] for a genuine empty result.
    """

    name: ClassVar[str]
    default_rps: ClassVar[float]
    default_base_url: ClassVar[str] = ""
    privacy: ClassVar[Privacy] = "cloud"
    kind: ClassVar[SourceKind] = "web"
    # The Settings field holding the provider's key (or email), its environment variable, and whether
    # the provider works without it (semantic_scholar and pubmed only go slower).
    key_field: ClassVar[str | None] = None
    key_env: ClassVar[str] = ""
    key_required: ClassVar[bool] = True

    def __init__(self, settings: Settings, client: httpx.AsyncClient) -> None:
        self.settings = settings
        self.client = client

    @property
    def requests_per_second(self) -> float:
        return self.settings.provider_rps(self.name, self.default_rps)

    @property
    def base_url(self) -> str:
        return self.settings.provider_base_url(self.name, self.default_base_url)

    def is_available(self) -> bool:
        return self.unavailable_reason() is None

    def unavailable_reason(self) -> str | None:
        """None when usable; otherwise a short reason ("TAVILY_API_KEY is not set")."""
        if self.key_field and self.key_required and not self.has_key():
            return f"{self.key_env} is not set"
        return None

    def has_key(self) -> bool | None:
        """True/False for providers that take a key or email, None for those that need none."""
        if self.key_field is None:
            return None
        value = getattr(self.settings, self.key_field)
        return bool(secret_value(value) if isinstance(value, SecretStr) else value)

    @abstractmethod
    async def search(
        self, query: str, max_results: int = 10, filters: dict[str, Any] | None = None
    ) -> list[SourceResult]:
        """Run one query and return normalized results, best first."""
