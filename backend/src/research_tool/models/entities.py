"""What research collects: sources, entities, facts (with their evidence) and citations.

These models live at the boundaries; the graph state holds their `model_dump(mode="json")` dicts
(plain JSON only, so the checkpoint serializer never mangles them).
"""

from __future__ import annotations

import hashlib
import re
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from research_tool.core.untrusted_text import clean_value

EntityType = Literal["person", "organization", "place", "work", "concept", "date", "number", "other"]


def utc_now_iso() -> str:
    return datetime.now(UTC).isoformat()


def normalize_key(text: str) -> str:
    """Case- and whitespace-insensitive key used to merge entities and facts."""
    return re.sub(r"\s+", " ", re.sub(r"[^\w\s]", " ", text.casefold())).strip()


class StrictModel(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SourceResult(StrictModel):
    """One result from a provider, normalized. `url` is canonical (see providers/source_identity.py).

    Its text is untrusted: NUL and other control characters are removed here, where every provider's results
    (and the local corpus's) enter, so no store ever sees them (core/untrusted_text.py)."""

    url: str
    title: str
    snippet: str = ""
    source_name: str
    retrieved_at: str = Field(default_factory=utc_now_iso)
    full_content: str | None = None
    quality_score: float = Field(default=0.5, ge=0.0, le=1.0)
    published_date: str | None = None
    authors: list[str] = Field(default_factory=list)
    doi: str | None = None
    # Where in a local document the text comes from (file and document id); None for web results.
    location: str | None = None
    # Provider rank of the result for the query that found it (1 = best), and that query.
    rank: int | None = None
    query: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _clean_untrusted_text(cls, data: Any) -> Any:
        return clean_value(data) if isinstance(data, dict) else data

    def text(self) -> str:
        """Best text available for extraction: full content if fetched, else the snippet."""
        return self.full_content or self.snippet


class Evidence(StrictModel):
    """The exact span of one source that states a fact."""

    source_url: str
    quote: str


class Fact(StrictModel):
    id: str
    statement: str
    evidence: list[Evidence]
    subject: str | None = None
    confidence: float = Field(default=0.5, ge=0.0, le=1.0)
    verified: bool = False
    contradictions: list[str] = Field(default_factory=list)  # ids of facts that conflict with this one
    iteration: int = 0
    relevance: float = Field(default=0.0, ge=0.0)
    duplicate: bool = False  # merged into another fact by cross-verification; kept only so re-runs stay idempotent

    @staticmethod
    def make_id(statement: str) -> str:
        return hashlib.sha1(normalize_key(statement).encode()).hexdigest()[:16]

    @property
    def source_urls(self) -> list[str]:
        return sorted({e.source_url for e in self.evidence})


class Entity(StrictModel):
    key: str  # normalized name
    name: str
    entity_type: EntityType = "other"
    sources: list[str] = Field(default_factory=list)
    first_seen: str = Field(default_factory=utc_now_iso)
    mention_count: int = 1
    iteration: int = 0


class Citation(StrictModel):
    """A numbered source in the report (DESIGN §7)."""

    id: str  # "[n]"
    title: str
    url: str
    type: str  # web | academic | local | encyclopedia
    location: str
    provider: str
    authors: list[str] = Field(default_factory=list)
    year: int | None = None
    doi: str | None = None
    retrieved_at: str


class AccessFailure(StrictModel):
    """A provider or page that could not be read; its message may quote the remote side (cleaned like SourceResult)."""

    provider: str
    url: str | None = None
    query: str | None = None
    error_type: str
    message: str
    iteration: int = 0
    at: str = Field(default_factory=utc_now_iso)

    @model_validator(mode="before")
    @classmethod
    def _clean_untrusted_text(cls, data: Any) -> Any:
        return clean_value(data) if isinstance(data, dict) else data

    def key(self) -> str:
        raw = f"{self.provider}|{self.url}|{self.query}|{self.error_type}|{self.iteration}"
        return hashlib.sha1(raw.encode()).hexdigest()[:16]
