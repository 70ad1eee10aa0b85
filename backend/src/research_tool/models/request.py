"""What a caller may ask for when starting research: shared by the CLI, the API and /run."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from research_tool.core.settings import PROVIDER_NAMES
from research_tool.core.untrusted_text import refuse_unsafe
from research_tool.models.domain import DomainName
from research_tool.models.tiers import TierName

MAX_QUERY_CHARS = 2000
PrivacyMode = Literal["local_only", "hybrid", "cloud_allowed"]
ReportFormat = Literal["md", "json", "html", "bib"]
DEFAULT_FORMATS: tuple[ReportFormat, ...] = ("md", "json")
SEARCH_PROVIDERS: tuple[str, ...] = tuple(p for p in PROVIDER_NAMES if p != "crawler")
LOCAL_PROVIDERS = frozenset({"local"})  # the providers whose privacy is `local`: nothing leaves the machine


def default_privacy(providers: list[str] | None, llm: str) -> PrivacyMode:
    """The privacy mode of a request that names none, one rule for the CLI, the API, LangGraph, MCP and the page
    (issue 43): `local_only` when it searches only local folders and the engine is the offline one (nothing
    leaves the machine, and the report says so), else `cloud_allowed`."""
    if providers and set(providers) <= LOCAL_PROVIDERS and llm.strip().lower() == "offline":
        return "local_only"
    return "cloud_allowed"


class ResearchRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)  # shared by the session records that carry it

    query: str = Field(max_length=MAX_QUERY_CHARS)
    tier: TierName | None = None  # None: the engine picks (offline: standard)
    domain: DomainName | None = None  # None: detected by clarify
    # None: by `default_privacy`, filled in (`with_default_privacy`) before the session is validated and written
    privacy_mode: PrivacyMode | None = None
    providers: list[str] | None = None  # None: from the domain configuration
    clarify: bool = False
    max_execution_time_s: float | None = Field(default=None, gt=0, le=24 * 3600)
    formats: list[ReportFormat] = Field(default_factory=lambda: list(DEFAULT_FORMATS))
    fetch: bool = True  # fetch full text of the best web results with the crawler
    corpus_dirs: list[str] = Field(default_factory=list)
    max_iterations: int | None = Field(default=None, ge=1, le=50)

    def with_default_privacy(self, llm: str) -> ResearchRequest:
        """This request with its privacy mode said: the caller's, else `default_privacy` for engine `llm`."""
        if self.privacy_mode is not None:
            return self
        return self.model_copy(update={"privacy_mode": default_privacy(self.providers, llm)})

    @property
    def privacy(self) -> PrivacyMode:
        """The privacy mode (a request not through `with_default_privacy`: the rule for the offline engine)."""
        return self.privacy_mode or default_privacy(self.providers, "offline")

    @field_validator("query")
    @classmethod
    def _query_has_text(cls, value: str) -> str:
        stripped = refuse_unsafe(value).strip()  # Postgres refuses NUL: the same 422 on every backend
        if not stripped:
            raise ValueError("the question is empty")
        return stripped

    @field_validator("providers")
    @classmethod
    def _known_providers(cls, value: list[str] | None) -> list[str] | None:
        if value is None:
            return None
        unknown = [p for p in value if p not in SEARCH_PROVIDERS]
        if unknown:
            raise ValueError(f"unknown provider(s): {', '.join(unknown)}; known: {', '.join(SEARCH_PROVIDERS)}")
        if not value:
            raise ValueError("providers, when given, must name at least one provider")
        return list(dict.fromkeys(value))

    @field_validator("formats")
    @classmethod
    def _formats_not_empty(cls, value: list[str]) -> list[str]:
        if not value:
            raise ValueError("formats, when given, must name at least one format")
        return list(dict.fromkeys(value))
