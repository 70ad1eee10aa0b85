"""The report (DESIGN §7): what `export` writes and `GET /report?format=json` returns.

Seed-compatible: `answer`, `citations[{id,title,type,location}]` and `metadata{timestamp,model,token_count}`
keep their names.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from research_tool.models.entities import Citation


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Finding(Strict):
    statement: str  # carries its [n] markers
    citations: list[str]  # ["[1]", "[3]"]
    confidence: float = Field(ge=0.0, le=1.0)
    verified: bool  # independent sources support it; false for a finding that does not bear on the question
    contradictions: list[str] = Field(default_factory=list)  # statements that conflict with this one
    # false: the finding shares too little with the question; shown under "Also in the sources", with no mark
    bears_on_question: bool = True


class ReportEntity(Strict):
    name: str
    type: str
    mentions: int
    sources: int


class ModelFallback(Strict):
    """One step the model could not do; the offline engine did it instead (issue 14)."""

    step: str  # clarify | apply_answers | plan | extract | reflect | synthesize
    iteration: int
    source: str | None = None  # extract: the source's URL
    reason: str  # model_timeout | session_deadline | token_budget | engine_unavailable | engine_output
    message: str


class ProviderFailure(Strict):
    """A provider whose searches failed in this session, and why (issue 24)."""

    provider: str
    calls: int  # its searches in this session
    failed: int  # of them, the failed ones
    # error type -> failed searches: dns | timeout | rate_limited | circuit_open | server_error | access_denied |
    # bad_response | provider_unavailable (the first cause first)
    reasons: dict[str, int]


class ReportMetadata(Strict):
    timestamp: str
    engine: str
    model: str
    token_count: int
    iterations: int
    duration_s: float  # the session's whole wall time, from start to the report's export
    provider_calls: int
    access_failures: int
    degraded_mode: bool  # search was limited, or the answer was not written by the model it was asked of
    degraded_reason: str | None = None  # why, in one sentence
    fallbacks: list[ModelFallback] = Field(default_factory=list)  # every step done offline instead, in order
    # what the engine noticed about its model (a model without a chat template: issue 43), one sentence each
    model_notes: list[str] = Field(default_factory=list)
    provider_failures: list[ProviderFailure] = Field(default_factory=list)  # providers whose searches failed
    citations_removed: int = 0  # [n] markers dropped: unresolvable or unsupported by the cited text
    sources_retrieved: int = 0
    facts_extracted: int = 0
    facts_verified: int = 0
    quality: dict[str, Any] = Field(default_factory=dict)  # last cycle's evaluation scores
    budget: dict[str, Any] = Field(default_factory=dict)  # ledger: time, provider calls, tokens (used / limit)
    trace_id: str | None = None  # the OpenTelemetry trace the report was written in (null while tracing is off)
    cost_usd: float | None = None  # token_count at RESEARCH_PRICE_TABLE's price for the model (null: not priced)


class Report(Strict):
    session_id: str
    query: str
    refined_query: str
    domain: str
    tier: str
    privacy_mode: str
    status: str
    stop_reason: str | None
    short_answer: str | None = None  # the span that answers (a name, a date, "yes"/"no", the API call), or null
    answered: bool = True  # false: the sources found do not answer the question (the answer says so)
    answer: str
    findings: list[Finding]
    citations: list[Citation]
    entities: list[ReportEntity]
    gaps: list[str]
    saturation: list[dict[str, Any]]
    metadata: ReportMetadata
