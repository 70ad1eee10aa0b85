"""Research tiers: how many cycles, queries and sources a session may use (DESIGN §2)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

TierName = Literal["simple", "standard", "deep"]
TIER_NAMES: tuple[str, ...] = ("simple", "standard", "deep")


class TierConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: TierName
    max_iterations: int = Field(ge=1)
    max_queries: int = Field(ge=1)  # per cycle
    max_sources: int = Field(ge=1)  # sources read in full per cycle and cited at most in the report
    max_execution_time_s: float = Field(gt=0)


TIERS: dict[str, TierConfig] = {
    "simple": TierConfig(name="simple", max_iterations=2, max_queries=3, max_sources=5, max_execution_time_s=120),
    "standard": TierConfig(name="standard", max_iterations=5, max_queries=10, max_sources=15, max_execution_time_s=300),
    "deep": TierConfig(name="deep", max_iterations=10, max_queries=15, max_sources=20, max_execution_time_s=900),
}
