"""Per-domain source configuration (seed 004 §2.2): which providers to ask first, what counts as verified."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

DomainName = Literal["general", "academic", "medical", "technical", "competitive_intelligence"]
DOMAIN_NAMES: tuple[str, ...] = ("general", "academic", "medical", "technical", "competitive_intelligence")


class DomainConfiguration(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    domain: DomainName
    primary_sources: list[str]
    secondary_sources: list[str]
    academic_required: bool
    verification_threshold: float = Field(ge=0.0, le=1.0)
    keywords: list[str]
    excluded_sources: list[str] = Field(default_factory=list)

    def provider_order(self) -> list[str]:
        """Primary then secondary providers, without the excluded ones."""
        seen: list[str] = []
        for name in [*self.primary_sources, *self.secondary_sources]:
            if name not in seen and name not in self.excluded_sources:
                seen.append(name)
        return seen


DOMAINS: dict[str, DomainConfiguration] = {
    "general": DomainConfiguration(
        domain="general",
        primary_sources=["local", "tavily", "brave", "duckduckgo", "wikipedia"],
        secondary_sources=["exa", "semantic_scholar"],
        academic_required=False,
        verification_threshold=0.6,
        keywords=[],
    ),
    "academic": DomainConfiguration(
        domain="academic",
        primary_sources=["local", "semantic_scholar", "arxiv", "pubmed"],
        secondary_sources=["unpaywall", "exa", "wikipedia", "tavily"],
        academic_required=True,
        verification_threshold=0.7,
        keywords=["study", "paper", "research", "evidence", "journal", "theory", "experiment", "dataset", "arxiv"],
    ),
    "medical": DomainConfiguration(
        domain="medical",
        primary_sources=["local", "pubmed", "semantic_scholar"],
        secondary_sources=["unpaywall", "arxiv", "tavily"],
        academic_required=True,
        verification_threshold=0.8,
        keywords=[
            "clinical",
            "patient",
            "patients",
            "treatment",
            "diagnosis",
            "therapy",
            "disease",
            "drug",
            "symptom",
            "symptoms",
            "trial",
            "dose",
            "vaccine",
            "cancer",
            "diabetes",
            "medical",
        ],
        excluded_sources=["wikipedia"],
    ),
    "technical": DomainConfiguration(
        domain="technical",
        primary_sources=["local", "tavily", "exa", "brave", "duckduckgo"],
        secondary_sources=["wikipedia", "arxiv"],
        academic_required=False,
        verification_threshold=0.6,
        keywords=[
            "python",
            "api",
            "function",
            "library",
            "code",
            "programming",
            "software",
            "module",
            "error",
            "install",
            "configure",
            "database",
            "server",
            "linux",
            "compiler",
            "subprocess",
        ],
    ),
    "competitive_intelligence": DomainConfiguration(
        domain="competitive_intelligence",
        primary_sources=["local", "tavily", "exa", "brave"],
        secondary_sources=["duckduckgo", "wikipedia"],
        academic_required=False,
        verification_threshold=0.6,
        keywords=["company", "market", "competitor", "competitors", "funding", "product", "pricing", "revenue"],
    ),
}
