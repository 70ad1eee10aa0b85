"""A session's effective limits: its tier, then request and environment overrides.

The time limit is the session's whole time, the report written (issue 35): searching and the model steps may use
it up to `working_time_s`; the rest (`finish_reserve_s`) is kept for writing the report without the model
(synthesize's offline path, the citation check, export) and for the caller's own ending (the CLI printing the
report and exiting), so a `run --max-time 120` ends inside 120 s of wall time."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from research_tool.core.settings import Settings
from research_tool.models.tiers import TIERS

FINISH_RESERVE_SHARE = 0.05  # of the time limit, kept for writing the report ...
FINISH_RESERVE_MIN_S = 4.0  # ... at least this (measured: up to 1 s to write and 1-4 s for the CLI to exit on a
FINISH_RESERVE_MAX_S = 15.0  # loaded 2-core machine) and at most this, never more than a quarter of the limit
FINISH_RESERVE_MAX_SHARE = 0.25


def finish_reserve_s(time_limit_s: float) -> float:
    """The end of the time limit that searching and the model steps may not use: 5% of it, at least 4 s, at
    most 15 s, and never more than a quarter of it."""
    wanted = max(FINISH_RESERVE_SHARE * time_limit_s, FINISH_RESERVE_MIN_S)
    return min(wanted, FINISH_RESERVE_MAX_S, FINISH_RESERVE_MAX_SHARE * time_limit_s)


class SessionLimits(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    tier: str
    max_iterations: int
    max_queries: int
    max_sources: int
    max_execution_time_s: float
    provider_call_budget: int
    token_budget: int

    @property
    def working_time_s(self) -> float:
        """The part of the time limit that searching and the model steps may use (the rest writes the report)."""
        return self.max_execution_time_s - finish_reserve_s(self.max_execution_time_s)


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
