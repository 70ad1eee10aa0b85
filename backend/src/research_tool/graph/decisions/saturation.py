"""When to stop researching (seed 004 §6, DESIGN §2).

Saturation is the primary stop: after every cycle four metrics say whether the last cycle still added
knowledge. Guards (user stop, time, provider calls, tokens, iterations) stop a session that has not
saturated. Every decision carries a `StopReason` and a sentence a person can read.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field


class StopReason(StrEnum):
    USER_REQUESTED = "user_requested"
    MAX_EXECUTION_TIME = "max_execution_time"
    PROVIDER_CALL_BUDGET = "provider_call_budget"
    TOKEN_BUDGET = "token_budget"
    ALL_PROVIDERS_FAILED = "all_providers_failed"
    FACT_SATURATION = "fact_saturation"
    ENTITY_SATURATION = "entity_saturation"
    SOURCE_COVERAGE = "source_coverage"
    CITATION_CIRCULARITY = "citation_circularity"
    SUFFICIENT = "sufficient"
    MAX_ITERATIONS = "max_iterations"


STOP_MESSAGES: dict[StopReason, str] = {
    StopReason.USER_REQUESTED: "Stopped at the user's request; the report uses what was collected so far.",
    StopReason.MAX_EXECUTION_TIME: "Stopped: the session reached its maximum execution time.",
    StopReason.PROVIDER_CALL_BUDGET: "Stopped: the provider-call budget is spent.",
    StopReason.TOKEN_BUDGET: "Stopped: the token budget is spent.",
    StopReason.ALL_PROVIDERS_FAILED: "Stopped: every search provider failed; the report is degraded.",
    StopReason.FACT_SATURATION: "Saturated: the last cycle added almost no new facts.",
    StopReason.ENTITY_SATURATION: "Saturated: the last cycle added almost no new entities.",
    StopReason.SOURCE_COVERAGE: "Saturated: no unexplored query remains.",
    StopReason.CITATION_CIRCULARITY: "Saturated: searches keep returning sources already read.",
    StopReason.SUFFICIENT: "Stopped: the question's required information has been found.",
    StopReason.MAX_ITERATIONS: "Stopped: the tier's maximum number of research cycles was reached.",
}


class SaturationThresholds(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    min_new_entities_ratio: float = Field(default=0.05, ge=0, le=1)
    min_new_facts_ratio: float = Field(default=0.05, ge=0, le=1)
    max_source_coverage: float = Field(default=0.95, ge=0, le=1)
    max_citation_circularity: float = Field(default=0.80, ge=0, le=1)


class SaturationMetrics(BaseModel):
    model_config = ConfigDict(extra="forbid")

    iteration: int
    new_entities_ratio: float  # entities first seen this cycle / all entities
    new_facts_ratio: float  # facts first seen this cycle / all facts
    citation_circularity: float  # distinct results this cycle already found in earlier cycles / distinct results
    source_coverage: float  # queries run / (queries run + new queries still to run)
    new_entities: int
    new_facts: int
    total_entities: int
    total_facts: int


def _ratio(part: int, whole: int) -> float:
    return round(part / whole, 4) if whole > 0 else 0.0


def calculate_saturation(
    *,
    iteration: int,
    entities_before: int,
    entities_after: int,
    facts_before: int,
    facts_after: int,
    results_this_cycle: int,
    already_known_results: int,
    queries_run: int,
    queries_remaining: int,
) -> SaturationMetrics:
    new_entities = max(entities_after - entities_before, 0)
    new_facts = max(facts_after - facts_before, 0)
    return SaturationMetrics(
        iteration=iteration,
        new_entities_ratio=_ratio(new_entities, entities_after),
        new_facts_ratio=_ratio(new_facts, facts_after),
        citation_circularity=_ratio(already_known_results, results_this_cycle),
        source_coverage=_ratio(queries_run, queries_run + queries_remaining) if queries_run else 0.0,
        new_entities=new_entities,
        new_facts=new_facts,
        total_entities=entities_after,
        total_facts=facts_after,
    )


def saturation_stop(metrics: SaturationMetrics, thresholds: SaturationThresholds) -> StopReason | None:
    """Which saturation threshold (if any) says the last cycle stopped adding knowledge."""
    if metrics.iteration <= 1 and metrics.total_facts == 0:
        return None  # nothing found yet: the guards, not saturation, decide
    if metrics.new_facts_ratio < thresholds.min_new_facts_ratio:
        return StopReason.FACT_SATURATION
    if metrics.total_entities and metrics.new_entities_ratio < thresholds.min_new_entities_ratio:
        return StopReason.ENTITY_SATURATION  # sources that name nothing (a how-to folder) say nothing of saturation
    if metrics.source_coverage > thresholds.max_source_coverage:
        return StopReason.SOURCE_COVERAGE
    if metrics.citation_circularity > thresholds.max_citation_circularity:
        return StopReason.CITATION_CIRCULARITY
    return None


class GuardReadings(BaseModel):
    """What the guards look at after a cycle."""

    model_config = ConfigDict(extra="forbid")

    stop_requested: bool
    elapsed_s: float
    max_execution_time_s: float
    provider_calls: int
    provider_call_budget: int
    tokens_used: int
    token_budget: int
    iteration: int
    max_iterations: int
    cycle_calls: int  # provider calls made in this cycle
    cycle_failures: int  # of which failed


def guard_stop(readings: GuardReadings) -> StopReason | None:
    """Guards that stop a session regardless of saturation, most urgent first."""
    if readings.stop_requested:
        return StopReason.USER_REQUESTED
    if readings.elapsed_s >= readings.max_execution_time_s:
        return StopReason.MAX_EXECUTION_TIME
    if readings.provider_calls >= readings.provider_call_budget:
        return StopReason.PROVIDER_CALL_BUDGET
    if readings.tokens_used >= readings.token_budget:
        return StopReason.TOKEN_BUDGET
    if readings.cycle_calls > 0 and readings.cycle_failures == readings.cycle_calls:
        return StopReason.ALL_PROVIDERS_FAILED
    return None


def decide_stop(
    readings: GuardReadings,
    metrics: SaturationMetrics,
    thresholds: SaturationThresholds,
    *,
    sufficient: bool,
    has_next_queries: bool,
) -> StopReason | None:
    """None means: run another cycle."""
    reason = guard_stop(readings) or saturation_stop(metrics, thresholds)
    if reason is not None:
        return reason
    if sufficient:
        return StopReason.SUFFICIENT
    if not has_next_queries:
        return StopReason.SOURCE_COVERAGE
    if readings.iteration >= readings.max_iterations:
        return StopReason.MAX_ITERATIONS
    return None
