"""Issue 35: requests a real model server obeys, and structured output by capability. The real clients
(`ChatOpenAI`, `ChatOllama`) against scripted servers on 127.0.0.1 that take `json_schema` (OpenAI, vLLM), refuse
it with HTTP 500 as llama-cpp-python's server does, or refuse every `response_format`."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator

import pytest

from research_tool.engines.base import CallLimits, FallbackNotice
from research_tool.engines.factory import MAX_ANSWER_TOKENS, create_engine
from research_tool.engines.llm import LLMEngine
from research_tool.engines.llm_schemas import ClarifyAnswer
from research_tool.engines.output_format import forget_servers
from research_tool.engines.structured_output import placeholder_problem
from research_tool.models.domain import DOMAINS
from research_tool.models.schemas import PlanResponse

from .conftest import llm_settings
from .fallback_engine import OFFLINE_INTENT, RecordingFallback
from .servers import OllamaServer, OpenAIServer, Reply

QUESTION = "When was the Eiffel Tower built?"
PLAN = json.dumps({"queries": [{"query": "Eiffel Tower construction date", "intent": "date"}]})
PLACEHOLDER_PLAN = json.dumps({"queries": [{"query": "string", "intent": "string"}]})


@pytest.fixture(autouse=True)
def _fresh_memory() -> Iterator[None]:
    forget_servers()
    yield
    forget_servers()


async def _engine(server: OpenAIServer | OllamaServer, kind: str, **settings: object) -> LLMEngine:
    engine = create_engine(
        llm_settings(kind, server.base_url, **settings), privacy_mode="local_only", fallback=RecordingFallback()
    )
    assert isinstance(engine, LLMEngine)
    return engine


@pytest.fixture
async def refusing_schema() -> AsyncIterator[OpenAIServer]:
    """llama-cpp-python's server: HTTP 500 to `json_schema`, a grammar from `json_object` + `schema`."""
    with OpenAIServer(refuse_formats=frozenset({"json_schema"})) as server:
        yield server  # type: ignore[misc]


def _format(body: dict[str, object]) -> dict[str, object] | None:
    value = body.get("response_format")
    return value if isinstance(value, dict) else None


async def test_a_server_that_takes_json_schema_gets_the_schema_streamed_with_both_cap_fields() -> None:
    with OpenAIServer() as server:
        server.script("plan", PLAN, PLAN)
        engine = await _engine(server, "openai")
        try:
            await engine.plan(QUESTION, DOMAINS["general"], max_queries=3)
            await engine.plan(QUESTION, DOMAINS["general"], max_queries=3)
        finally:
            await engine.aclose()
    first, second = server.requests_for("plan")
    shape = _format(first.body)
    assert shape is not None and shape["type"] == "json_schema"
    assert shape["json_schema"]["schema"] == PlanResponse.model_json_schema()  # type: ignore[index]
    assert first.body["max_tokens"] == first.body["max_completion_tokens"] == MAX_ANSWER_TOKENS
    assert first.body["stream"] is True
    assert first.body["stream_options"] == {"include_usage": True}
    assert _format(second.body) == shape


async def test_llama_cpp_refusing_json_schema_gets_json_object_with_the_schema_and_it_is_remembered(
    refusing_schema: OpenAIServer,
) -> None:
    refusing_schema.script("plan", PLAN)
    refusing_schema.script("clarify", Reply(json.dumps(_clarify())))
    engine = await _engine(refusing_schema, "openai")
    try:
        step = await engine.plan(QUESTION, DOMAINS["general"], max_queries=3)
        assert step.errors == [] and step.value.queries[0].query == "Eiffel Tower construction date"
    finally:
        await engine.aclose()
    refused = [r for r in refusing_schema.requests_for("plan") if _format(r.body)["type"] == "json_schema"]  # type: ignore[index]
    taken = refusing_schema.requests_for("plan")[-1]
    assert refused, "json_schema is tried first"
    assert taken.body["response_format"] == {"type": "json_object", "schema": PlanResponse.model_json_schema()}

    # A new engine (the next session) on the same server starts at the form that worked: no refused request.
    later = await _engine(refusing_schema, "openai")
    try:
        done = await later.clarify(QUESTION, None)
    finally:
        await later.aclose()
    assert done.errors == []
    (clarify,) = refusing_schema.requests_for("clarify")
    assert clarify.body["response_format"] == {"type": "json_object", "schema": ClarifyAnswer.model_json_schema()}


async def test_a_server_refusing_every_response_format_is_prompted_as_before() -> None:
    with OpenAIServer(refuse_formats=frozenset({"json_schema", "json_object"}), refusal_status=400) as server:
        server.script("plan", PLAN)
        engine = await _engine(server, "openai")
        try:
            step = await engine.plan(QUESTION, DOMAINS["general"], max_queries=3)
        finally:
            await engine.aclose()
    assert step.errors == []
    kinds = [(_format(r.body) or {}).get("type") for r in server.requests_for("plan")]
    assert kinds == ["json_schema", "json_object", None]
    assert '"queries"' in server.requests_for("plan")[-1].system_text  # the schema is still in the prompt


async def test_configured_prompting_sends_no_response_format() -> None:
    with OpenAIServer() as server:
        server.script("plan", PLAN)
        engine = await _engine(server, "openai", llm_structured_output="prompt")
        try:
            await engine.plan(QUESTION, DOMAINS["general"], max_queries=3)
        finally:
            await engine.aclose()
    (request,) = server.requests_for("plan")
    assert "response_format" not in request.body
    assert request.body["max_tokens"] == MAX_ANSWER_TOKENS


async def test_ollama_gets_the_schema_as_format() -> None:
    with OllamaServer() as server:
        server.script("plan", PLAN)
        engine = await _engine(server, "ollama")
        try:
            await engine.plan(QUESTION, DOMAINS["general"], max_queries=3)
        finally:
            await engine.aclose()
    (request,) = server.requests_for("plan")
    assert request.body["format"] == PlanResponse.model_json_schema()
    assert request.body["options"]["num_predict"] == MAX_ANSWER_TOKENS


def _clarify(**changes: object) -> dict[str, object]:
    answer: dict[str, object] = {
        "refined_query": "Eiffel Tower construction date",
        "domain": "general",
        "questions": [],
        "tier": "simple",
        "tier_reason": "a single date",
    }
    return answer | changes


async def test_placeholder_answers_are_refused_and_the_step_falls_back_with_the_reason(
    refusing_schema: OpenAIServer,
) -> None:
    refusing_schema.script("plan", PLACEHOLDER_PLAN, PLACEHOLDER_PLAN)
    notices: list[FallbackNotice] = []

    async def told(notice: FallbackNotice) -> None:
        notices.append(notice)

    engine = await _engine(refusing_schema, "openai")
    engine.bound_calls(CallLimits(), told)
    try:
        step = await engine.plan(QUESTION, DOMAINS["general"], max_queries=3)
    finally:
        await engine.aclose()
    assert step.value.queries[0].intent == OFFLINE_INTENT
    (error,) = step.errors
    assert error.error.type == "engine_output"
    assert "placeholder 'string'" in error.error.message
    assert [n.reason for n in notices] == ["engine_output"]
    retry = refusing_schema.requests_for("plan")[-1]
    assert "placeholder" in retry.user_messages[-1]  # the retry says what was wrong


async def test_a_placeholder_then_a_real_answer_is_accepted(refusing_schema: OpenAIServer) -> None:
    refusing_schema.script("clarify", json.dumps(_clarify(refined_query="refined_query")), json.dumps(_clarify()))
    engine = await _engine(refusing_schema, "openai")
    try:
        step = await engine.clarify(QUESTION, None)
    finally:
        await engine.aclose()
    assert step.errors == []
    assert step.value.refined_query == "Eiffel Tower construction date"


def test_placeholder_problem_names_placeholders_field_names_and_echoes_but_keeps_real_values() -> None:
    instructions = "Rewrite the question as one clear, self-contained research query."
    assert placeholder_problem(_clarify(tier_reason="..."), ClarifyAnswer)
    assert placeholder_problem(_clarify(refined_query="<string>"), ClarifyAnswer)
    assert placeholder_problem(_clarify(tier_reason="tier_reason"), ClarifyAnswer)
    assert placeholder_problem(_clarify(questions=["…"]), ClarifyAnswer)
    echo = _clarify(refined_query="one clear, self-contained research query")
    assert placeholder_problem(echo, ClarifyAnswer, instructions)
    assert placeholder_problem(_clarify(), ClarifyAnswer, instructions) is None
    assert placeholder_problem(_clarify(refined_query="What does int() return for None?"), ClarifyAnswer) is None


async def test_a_cancelled_call_closes_its_connection_and_its_tokens_count() -> None:
    """Streamed: the whole-call timeout closes the connection mid-answer (a server then stops generating), and
    the prompt plus the partial answer count against the budget; after three timeouts the model is skipped
    as timing out, not as unavailable."""
    with OpenAIServer() as server:
        server.default("plan", Reply(PLAN, trickle_s=0.4, trickle_bytes=256))  # the first chunk at once, the rest late
        engine = create_engine(
            llm_settings("openai", server.base_url, llm_timeout_s=0.6),
            privacy_mode="local_only",
            fallback=RecordingFallback(),
        )
        assert isinstance(engine, LLMEngine)
        try:
            steps = [await engine.plan(QUESTION, DOMAINS["general"], max_queries=3) for _ in range(4)]
        finally:
            await engine.aclose()
        requests = server.requests_for("plan")
        assert len(requests) == 3
        for request in requests:
            assert request.disconnected.wait(5), "the client left the stream when its time was up"
    assert [s.errors[0].error.type for s in steps] == ["model_timeout"] * 4
    assert all(s.tokens > 0 for s in steps[:3]) and steps[3].tokens == 0
    assert "timed out 3 times in a row" in steps[3].errors[0].error.message
