"""Each saturation threshold and each guard stops with its own reason; nothing stops a fresh, productive cycle."""

from __future__ import annotations

import pytest

from research_tool.graph.decisions.saturation import (
    GuardReadings,
    SaturationThresholds,
    StopReason,
    calculate_saturation,
    decide_stop,
)

THRESHOLDS = SaturationThresholds()


def readings(**overrides: object) -> GuardReadings:
    base: dict[str, object] = {
        "stop_requested": False,
        "elapsed_s": 1.0,
        "max_execution_time_s": 100.0,
        "provider_calls": 5,
        "provider_call_budget": 100,
        "tokens_used": 0,
        "token_budget": 1000,
        "iteration": 2,
        "max_iterations": 5,
        "cycle_calls": 5,
        "cycle_failures": 0,
    }
    base.update(overrides)
    return GuardReadings.model_validate(base)


def productive(**overrides: int) -> dict[str, int]:
    values = {
        "iteration": 2,
        "entities_before": 10,
        "entities_after": 20,
        "facts_before": 10,
        "facts_after": 20,
        "results_this_cycle": 10,
        "already_known_results": 2,
        "queries_run": 5,
        "queries_remaining": 5,
    }
    values.update(overrides)
    return values


def decide(
    metrics_kwargs: dict[str, int],
    guard: GuardReadings | None = None,
    *,
    sufficient: bool = False,
    has_next: bool = True,
) -> StopReason | None:
    metrics = calculate_saturation(**metrics_kwargs)
    return decide_stop(guard or readings(), metrics, THRESHOLDS, sufficient=sufficient, has_next_queries=has_next)


def test_productive_cycle_continues() -> None:
    assert decide(productive()) is None


def test_metrics_are_ratios_of_the_cycle() -> None:
    m = calculate_saturation(**productive())
    assert (m.new_entities_ratio, m.new_facts_ratio) == (0.5, 0.5)
    assert m.citation_circularity == 0.2
    assert m.source_coverage == 0.5


@pytest.mark.parametrize(
    ("overrides", "reason"),
    [
        ({"facts_before": 20, "facts_after": 20}, StopReason.FACT_SATURATION),
        ({"entities_before": 20, "entities_after": 20}, StopReason.ENTITY_SATURATION),
        ({"queries_run": 40, "queries_remaining": 1}, StopReason.SOURCE_COVERAGE),
        ({"results_this_cycle": 10, "already_known_results": 9}, StopReason.CITATION_CIRCULARITY),
    ],
)
def test_each_threshold_has_its_reason(overrides: dict[str, int], reason: StopReason) -> None:
    assert decide(productive(**overrides)) is reason


@pytest.mark.parametrize(
    ("overrides", "reason"),
    [
        ({"stop_requested": True}, StopReason.USER_REQUESTED),
        ({"elapsed_s": 100.0}, StopReason.MAX_EXECUTION_TIME),
        ({"provider_calls": 100}, StopReason.PROVIDER_CALL_BUDGET),
        ({"tokens_used": 1000}, StopReason.TOKEN_BUDGET),
        ({"cycle_failures": 5}, StopReason.ALL_PROVIDERS_FAILED),
        ({"iteration": 5}, StopReason.MAX_ITERATIONS),
    ],
)
def test_each_guard_has_its_reason(overrides: dict[str, object], reason: StopReason) -> None:
    assert decide(productive(), readings(**overrides)) is reason


def test_user_stop_wins_over_saturation() -> None:
    saturated = productive(facts_before=20, facts_after=20)
    assert decide(saturated, readings(stop_requested=True)) is StopReason.USER_REQUESTED


def test_sufficient_and_no_next_queries() -> None:
    assert decide(productive(), sufficient=True) is StopReason.SUFFICIENT
    assert decide(productive(), has_next=False) is StopReason.SOURCE_COVERAGE


def test_first_cycle_with_nothing_found_is_left_to_the_guards() -> None:
    empty = productive(iteration=1, entities_before=0, entities_after=0, facts_before=0, facts_after=0)
    assert decide(empty, readings(iteration=1)) is None


def test_sources_that_name_nothing_do_not_stop_on_entity_saturation() -> None:
    """A folder of how-to pages may hold facts but no names: no entity at all is no sign that research saturated."""
    nameless = productive(iteration=1, entities_before=0, entities_after=0, facts_before=0, facts_after=4)
    assert decide(nameless, readings(iteration=1)) is None


def test_thresholds_are_configurable() -> None:
    lenient = SaturationThresholds(min_new_facts_ratio=0.6)
    metrics = calculate_saturation(**productive())
    assert decide_stop(readings(), metrics, lenient, sufficient=False, has_next_queries=True) is (
        StopReason.FACT_SATURATION
    )
