"""One OpenTelemetry trace per research session (issue 36), received by a real OTLP/HTTP receiver that decodes
the requests with the official protobuf definitions: the span tree session -> node -> provider search / model
call, the semantic-convention names, the caller's `traceparent`, trace ids in the logs and the report, and no
question text unless RESEARCH_TRACE_CONTENT=1."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from research_tool.bench.wiki_replay import WikiReplay
from research_tool.models.request import ResearchRequest
from tests.api.conftest import QUESTION, offline_settings, serve
from tests.llm.scripted_answers import script_session
from tests.llm.servers import OpenAIServer
from tests.support.otlp_receiver import OtlpReceiver, Span
from tests.support.sessions import run_session

CALLER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER_SPAN = "00f067aa0ba902b7"
TRACEPARENT = f"00-{CALLER_TRACE}-{CALLER_SPAN}-01"
NODES = {"clarify", "plan", "collect", "process", "analyze", "evaluate", "synthesize", "export"}


def strings_in(spans: list[Span]) -> list[str]:
    """Every text a span carries: names, attribute values (lists flattened), event names and attributes."""
    found: list[str] = []

    def add(value: Any) -> None:
        if isinstance(value, str):
            found.append(value)
        elif isinstance(value, list):
            for item in value:
                add(item)
        elif isinstance(value, dict):
            for item in value.values():
                add(item)

    for span in spans:
        found.append(span.name)
        add(span.attributes)
        for event in span.events:
            found.append(event.name)
            add(event.attributes)
    return found


def by_id(spans: list[Span]) -> dict[str, Span]:
    return {s.span_id: s for s in spans}


def json_lines(text: str) -> list[dict[str, Any]]:
    lines = []
    for line in text.splitlines():
        if line.startswith("{"):
            try:
                lines.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return lines


@pytest.mark.slow
async def test_a_session_started_with_a_traceparent_is_one_trace_under_the_callers(
    otlp: OtlpReceiver, tmp_path: Path, wiki: tuple[str, WikiReplay], capsys: pytest.CaptureFixture[str]
) -> None:
    wiki_url, _ = wiki
    with OpenAIServer() as model:
        script_session(model)
        settings = offline_settings(
            tmp_path / "data",
            wiki_url,
            llm="openai:test-model",
            openai_base_url=model.base_url,
            openai_api_key="sk-test",
            llm_speed_probe=False,  # the scripted server answers the steps it knows
            wikipedia_rps=4.0,  # a spacing the planned queries wait for: rate-limit waits on the provider spans
            log_format="json",
            log_level="DEBUG",
        )
        async with serve(settings) as api:
            started = await api.client.post(
                "/api/research/start",
                json={"query": QUESTION, "providers": ["wikipedia"], "fetch": False, "tier": "simple"},
                headers={"traceparent": TRACEPARENT},
            )
            assert started.status_code == 202, started.text
            session_id = started.json()["session_id"]
            await api.wait_status(session_id, "completed")
            report = await api.report(session_id)
        # the server has stopped: its tracer provider flushed every span on the way out
    spans = otlp.wait_for(lambda got: any(s.name == "research.session" for s in got))

    # one trace: the caller's, with the session's root span a child of the caller's span
    roots = [s for s in spans if s.name == "research.session"]
    assert len(roots) == 1
    root = roots[0]
    assert (root.trace_id, root.parent_span_id) == (CALLER_TRACE, CALLER_SPAN)
    trace = otlp.trace(CALLER_TRACE)
    assert {s.trace_id for s in spans} == {CALLER_TRACE}, "every span of the session is in its one trace"
    assert report["metadata"]["trace_id"] == CALLER_TRACE
    assert root.resource["service.name"] == "research-tool-test"
    assert root.attributes["research.session.id"] == session_id
    assert root.attributes["research.outcome"] == "completed"
    assert root.attributes["research.stop_reason"] == report["stop_reason"]
    assert root.attributes["research.engine"] == "llm"
    assert len(root.attributes["research.question.sha256"]) == 16

    # the tree: root -> a span per node visit -> provider searches and model calls
    spans_by_id = by_id(trace)
    nodes = [s for s in trace if s.name.startswith("node ")]
    assert {s.attributes["research.node"] for s in nodes} == NODES
    assert all(s.parent_span_id == root.span_id for s in nodes)
    searches = [s for s in trace if s.name == "provider.search"]
    assert searches and all(spans_by_id[s.parent_span_id].name == "node collect" for s in searches)
    assert all(s.kind == "client" and s.attributes["research.provider"] == "wikipedia" for s in searches)
    assert {s.attributes["research.provider.status"] for s in searches} == {"ok"}
    assert all(s.attributes["research.provider.breaker"] == "closed" for s in searches)
    assert all(s.attributes["research.provider.attempts"] >= 1 for s in searches)
    assert any(e.name == "rate_limit.wait" for s in searches for e in s.events), "no search waited for its turn"

    calls = [s for s in trace if s.name == "chat test-model"]
    assert {s.attributes["research.step"] for s in calls} >= {"plan", "extract", "synthesize"}
    for call in calls:
        assert spans_by_id[call.parent_span_id].name.startswith("node ")
        assert call.kind == "client"
        attributes = call.attributes
        assert attributes["gen_ai.operation.name"] == "chat"
        assert attributes["gen_ai.system"] == attributes["gen_ai.provider.name"] == "openai"
        assert attributes["gen_ai.request.model"] == "test-model"
        assert attributes["gen_ai.response.finish_reasons"] == ["stop"]
        assert (attributes["gen_ai.usage.input_tokens"], attributes["gen_ai.usage.output_tokens"]) == (120, 30)
        assert "gen_ai.input.messages" not in attributes

    # no question text anywhere without RESEARCH_TRACE_CONTENT=1
    assert not [text for text in strings_in(trace) if QUESTION in text or "subprocess" in text.casefold()]

    # every log line written inside the session names its trace and span (phase boundaries: debug lines)
    lines = [line for line in json_lines(capsys.readouterr().err) if line.get("event") == "phase_started"]
    assert lines and all(line.get("trace_id") == CALLER_TRACE for line in lines)
    assert {line["span_id"] for line in lines} <= {s.span_id for s in nodes}


async def test_the_question_and_prompts_go_into_spans_only_with_the_content_flag(
    otlp: OtlpReceiver, tmp_path: Path, wiki: tuple[str, WikiReplay]
) -> None:
    wiki_url, _ = wiki
    settings = offline_settings(tmp_path / "data", wiki_url, trace_content=True)
    request = ResearchRequest(query=QUESTION, providers=["wikipedia"], fetch=False, tier="simple")
    result = await run_session(settings, request)
    assert result.record.status == "completed", result.record.error
    spans = otlp.wait_for(lambda got: any(s.name == "research.session" for s in got))
    root = next(s for s in spans if s.name == "research.session")
    assert root.attributes["research.question"] == QUESTION
    assert root.parent_span_id == "", "a session started without a traceparent is a trace of its own"
    assert root.attributes["research.engine"] == "offline"
    searches = [s for s in spans if s.name == "provider.search"]
    assert searches and all(s.attributes["research.query"] for s in searches)
    assert result.report is not None and result.report["metadata"]["trace_id"] == root.trace_id
