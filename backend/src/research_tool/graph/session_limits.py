"""A session's effective limits: its tier, then request and environment overrides."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from research_tool.core.settings import Settings
from research_tool.models.tiers import TIERS


class SessionLimits(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    tier: str
    max_iterations: int
    max_queries: int
    max_sources: int
    max_execution_time_s: float
    provider_call_budget: int
    token_budget: int


def resolve_limits(tier: str, request: dict[str, Any], settings: Settings) -> SessionLimits:
    base = TIERS[tier]
    return SessionLimits(
        tier=tier,
        max_iterations=request.get("max_iterations") or settings.max_iters or base.max_iterations,
        max_queries=settings.max_queries or base.max_queries,
        max_sources=settings.max_sources or base.max_sources,
        max_execution_time_s=request.get("max_execution_time_s")
        or settings.max_execution_time_s
        or base.max_execution_time_s,
        provider_call_budget=settings.provider_call_budget,
        token_budget=settings.token_budget,
    )
