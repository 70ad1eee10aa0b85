"""Per-cycle research quality, the way seed 003's evaluation engine scores it.

completeness: share of the question's required slots that are filled (or, without slots, facts found
against a target); credibility: source credibility by provider type and domain, raised by agreement;
relevance: how on-topic the extracted facts are; confidence: mean fact confidence; overall: weighted mean.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict

PROVIDER_CREDIBILITY: dict[str, float] = {
    "pubmed": 0.9,
    "semantic_scholar": 0.85,
    "arxiv": 0.8,
    "unpaywall": 0.85,
    "local": 0.8,
    "wikipedia": 0.7,
    "exa": 0.6,
    "tavily": 0.6,
    "brave": 0.55,
    "duckduckgo": 0.5,
}
HIGH_CREDIBILITY_SUFFIXES: tuple[str, ...] = (".gov", ".edu", ".int", "python.org", "nih.gov", "who.int")
WEIGHTS = {"completeness": 0.3, "credibility": 0.25, "relevance": 0.25, "confidence": 0.2}
FACT_TARGET = 10


class QualityScore(BaseModel):
    model_config = ConfigDict(extra="forbid")

    iteration: int
    completeness: float
    credibility: float
    relevance: float
    confidence: float
    overall: float
    gaps: list[str]


def source_credibility(source: Mapping[str, Any]) -> float:
    providers = source.get("found_by") or [source.get("source_name", "")]
    score = max(PROVIDER_CREDIBILITY.get(p, 0.5) for p in providers)
    host = urlsplit(str(source.get("url", ""))).hostname or ""
    if host.endswith(HIGH_CREDIBILITY_SUFFIXES):
        score = max(score, 0.85)
    if source.get("doi"):
        score = max(score, 0.8)
    return score


def _mean(values: Iterable[float]) -> float:
    items = list(values)
    return round(sum(items) / len(items), 4) if items else 0.0


def score_quality(
    *,
    iteration: int,
    sources: Mapping[str, Mapping[str, Any]],
    facts: Mapping[str, Mapping[str, Any]],
    slots: Mapping[str, bool],
    gaps: list[str],
) -> QualityScore:
    cited_urls = {e["source_url"] for f in facts.values() for e in f.get("evidence", [])}
    credibility = _mean(source_credibility(sources[u]) for u in cited_urls if u in sources)
    agreement = _mean(1.0 if f.get("verified") else 0.0 for f in facts.values())
    credibility = round(min(1.0, credibility * (0.85 + 0.15 * agreement)), 4) if credibility else 0.0
    if slots:
        completeness = _mean(1.0 if filled else 0.0 for filled in slots.values())
    else:
        completeness = round(min(1.0, len(facts) / FACT_TARGET), 4)
    relevance = _mean(min(1.0, float(f.get("relevance", 0.0))) for f in facts.values())
    confidence = _mean(float(f.get("confidence", 0.0)) for f in facts.values())
    parts = {"completeness": completeness, "credibility": credibility, "relevance": relevance, "confidence": confidence}
    overall = round(sum(WEIGHTS[k] * v for k, v in parts.items()), 4)
    return QualityScore(iteration=iteration, overall=overall, gaps=gaps, **parts)
