"""Parsing model answers: reasoning blocks, fences and prose are tolerated; schema drift never is."""

from __future__ import annotations

import pytest

from research_tool.core.errors import EngineOutputError
from research_tool.engines.llm_schemas import ClarifyAnswer, SynthesizeAnswer
from research_tool.engines.structured_output import parse_structured, strip_reasoning
from research_tool.models.schemas import PlanResponse

PLAN = '{"queries": [{"query": "a", "intent": "b"}]}'


@pytest.mark.parametrize(
    "answer",
    [
        PLAN,
        f'<think>Let me plan. {{"queries": []}}</think>{PLAN}',
        f"<THINK>\nmulti\nline\n</THINK>\n\n```json\n{PLAN}\n```",
        f"Sure! Here is the plan you asked for:\n{PLAN}\nHope this helps.",
        f"```\n{PLAN}\n```",
        f"The format is {{query, intent}}. ```json {PLAN}```",
        f"reasoning without an opening tag</think>\n{PLAN}",
    ],
)
def test_wrapped_answers_parse(answer: str) -> None:
    parsed = parse_structured(answer, PlanResponse)
    assert parsed.queries[0].query == "a"


def test_an_unknown_key_is_an_error_naming_it() -> None:
    with pytest.raises(EngineOutputError, match=r"queries\.0\.priority"):
        parse_structured('{"queries": [{"query": "a", "intent": "b", "priority": 2}]}', PlanResponse)


def test_a_wrong_value_is_an_error_naming_the_field() -> None:
    answer = '{"refined_query": "q", "domain": "astrology", "questions": [], "tier": "simple", "tier_reason": "r"}'
    with pytest.raises(EngineOutputError, match="domain"):
        parse_structured(answer, ClarifyAnswer)


def test_no_json_at_all_is_an_error_quoting_the_start() -> None:
    with pytest.raises(EngineOutputError, match=r"no JSON object.*I am sorry"):
        parse_structured("I am sorry, I cannot help with that.", PlanResponse)


def test_a_reasoning_block_cut_off_holds_no_answer() -> None:
    with pytest.raises(EngineOutputError):
        parse_structured('<think>I will answer {"queries": []} but', PlanResponse)


def test_truncated_json_is_an_error() -> None:
    with pytest.raises(EngineOutputError):
        parse_structured('{"answer": "It was built in 1889 [1]", "findings": [', SynthesizeAnswer)


def test_strip_reasoning_keeps_the_answer_only() -> None:
    assert strip_reasoning("<think>a</think> x <thinking>b</thinking> y") == "x  y"
