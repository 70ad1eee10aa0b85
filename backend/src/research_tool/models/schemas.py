"""The seed's structured-output contracts (000 §5), strict: unknown keys are errors."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ResponseMetadata(Strict):
    timestamp: str
    model: str
    token_count: int = Field(ge=0)


class PlanQuery(Strict):
    query: str = Field(min_length=1)
    intent: str


class PlanResponse(Strict):
    queries: list[PlanQuery]


class ReflectionResponse(Strict):
    sufficient: bool
    confidence: float = Field(ge=0.0, le=1.0)
    gaps: list[str]
    new_queries: list[PlanQuery]
    metadata: ResponseMetadata


class CitationRef(Strict):
    id: str = Field(pattern=r"^\[\d+\]$")
    title: str
    type: str
    location: str


class ErrorDetail(Strict):
    type: str
    message: str
    retryable: bool


class ErrorResponse(Strict):
    error: ErrorDetail
