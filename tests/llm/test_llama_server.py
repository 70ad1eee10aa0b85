"""Issue 35: the engine against a real local model server, llama-cpp-python's OpenAI-compatible server with
SmolLM2-135M-Instruct, on 127.0.0.1 behind a recording proxy (`llama_server.py`). Marked `llama_server`; skipped,
saying why, where `.ci/run` could not build or install the server or the model.

A 135M model exercises the plumbing, not the answers: these tests check what the engine asks and how the session
ends, never what the model says.

llama-cpp-python checks for a closed connection between answer tokens: a generation stops within a token of the
cancel, but a prompt whose evaluation has begun is evaluated to its end. The engine measures the server's prompt
speed from its own calls and sends no prompt it could not evaluate before the call's deadline (less of the
sources, or nothing: `prompt_timing`), so "no orphaned generation" is checked as: the server is idle within 5 s
of the session's end, and of a call cut short."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from research_tool.demo_corpus import build_demo_corpus
from research_tool.engines.base import FALLBACK_REASONS, CallLimits
from research_tool.engines.factory import MAX_ANSWER_TOKENS, create_engine
from research_tool.engines.llm import LLMEngine
from research_tool.engines.output_format import forget_servers
from research_tool.engines.prompt_timing import prompt_work
from research_tool.engines.structured_output import placeholder_problem
from research_tool.models.domain import DOMAINS
from research_tool.models.entities import SourceResult
from research_tool.models.schemas import PlanQuery
from tests.support.sessions import local_request, run_session

from .conftest import llm_settings
from .fallback_engine import RecordingFallback
from .llama_server import MODEL_ALIAS, LlamaServer, RecordingProxy, missing_reason

pytestmark = [
    pytest.mark.llama_server,
    pytest.mark.slow,
    pytest.mark.skipif(missing_reason() is not None, reason=missing_reason() or ""),
]

QUESTION = "How do I run a subprocess with a timeout and capture its output?"
ORPHAN_LIMIT_S = 5.0  # a generation may outlive the call that asked for it by at most this


@pytest.fixture(scope="module")
def llama(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    server = LlamaServer.start(tmp_path_factory.mktemp("llama") / "server.log")
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
async def proxy(llama: LlamaServer) -> AsyncIterator[RecordingProxy]:
    forget_servers()
    recording = await RecordingProxy.start(llama.port)
    try:
        yield recording
    finally:
        await recording.close()
        forget_servers()


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("llama_corpus")
    build_demo_corpus(folder, modules=("subprocess",))
    return folder


def _settings(proxy: RecordingProxy, tmp_path: Path, **overrides: object) -> object:
    settings = llm_settings("openai", proxy.base_url, data_dir=tmp_path / "data", **overrides)
    return settings.model_copy(update={"llm": f"openai:{MODEL_ALIAS}"})


async def test_a_session_searches_ends_within_its_limit_and_says_what_the_model_did(
    llama: LlamaServer, proxy: RecordingProxy, corpus: Path, tmp_path: Path
) -> None:
    # clarify and plan may use 10 s together: a slow model must still leave the search its turn. The first call
    # (clarify) meets a server whose prompt speed the engine has not measured yet: on a crowded machine its prompt
    # is cut at those 10 s and evaluated on for about as long again, which the limit leaves room for.
    limit_s = 30.0
    settings = _settings(proxy, tmp_path, max_execution_time_s=limit_s, llm_timeout_s=60.0)
    request = local_request(corpus, QUESTION, tier="simple", clarify=False)
    started = time.monotonic()
    result = await run_session(settings, request)  # type: ignore[arg-type]
    elapsed = time.monotonic() - started
    idle_after = llama.idle_within(ORPHAN_LIMIT_S)
    chats = proxy.chat_requests()

    assert result.record.status == "completed", result.record.error
    report = result.report
    assert report is not None
    meta = report["metadata"]
    assert meta["budget"]["time_s"]["used"] < limit_s + 5.0, f"the session's steps took {elapsed:.1f} s in all"
    assert elapsed < limit_s + 15.0, f"the session took {elapsed:.1f} s against a {limit_s:.0f} s limit"
    assert idle_after is not None, f"the server was still working {ORPHAN_LIMIT_S:.0f} s after the session ended"
    assert meta["provider_calls"] >= 1 and meta["sources_retrieved"] >= 1, "the search did not run"

    # What the server was asked: the cap in the field it reads, streamed, JSON by its schema.
    assert chats, "the model was never called"
    assert all(body["max_tokens"] == MAX_ANSWER_TOKENS and body["stream"] is True for body in chats)
    kinds = [(body.get("response_format") or {}).get("type") for body in chats]
    assert kinds[0] == "json_schema", "the strongest form is tried first"
    assert "json_object" in kinds, "llama-cpp-python refuses json_schema; json_object with the schema follows"
    assert all(k == "json_object" for k in kinds[kinds.index("json_object") :]), "the working form is kept"
    shapes = [body["response_format"] for body in chats]
    assert all(s["json_schema"]["schema"] for s in shapes if s["type"] == "json_schema")
    assert all(s["schema"]["properties"] for s in shapes if s["type"] == "json_object")

    # The report tells what the model did: every fallback has a reason; no placeholder was kept.
    assert all(f["reason"] in FALLBACK_REASONS for f in meta["fallbacks"])
    if any(f["step"] == "synthesize" for f in meta["fallbacks"]):
        assert "did not write the answer" in meta["degraded_reason"]
    if meta["degraded_reason"] and not meta["provider_failures"]:
        assert "searches failed" not in meta["degraded_reason"]
    kept = [report["refined_query"], *(result.state.get("queries_run") or {})]
    assert not [q for q in kept if placeholder_problem({"query": q}, PlanQuery)], "a placeholder became a query"
    assert meta["token_count"] > 0


async def test_a_call_cut_short_closes_its_stream_and_leaves_no_prompt_evaluating(
    llama: LlamaServer, proxy: RecordingProxy, tmp_path: Path
) -> None:
    settings = _settings(proxy, tmp_path, llm_timeout_s=300.0)
    engine = create_engine(settings, privacy_mode="local_only", fallback=RecordingFallback())  # type: ignore[arg-type]
    assert isinstance(engine, LLMEngine)
    text = " ".join(
        f"Sentence {i}: subprocess.run(args, timeout={i}) raises TimeoutExpired when the child outlives it."
        for i in range(64)
    )
    source = SourceResult(
        url="https://example.org/subprocess", title="subprocess", source_name="local", full_content=text
    )
    try:
        await engine.plan(QUESTION, DOMAINS["technical"], 3)  # the engine measures the server's prompt speed
        speed = engine._requests.timing.tokens_per_s
        assert speed is not None, "the plan call did not measure the server's prompt speed"
        whole_s = prompt_work(0, (len(text) + 1500) // 4) / speed  # the whole extract prompt, as predicted
        # Time for an eighth or so of the source's text and some answer tokens, not for the whole prompt: the
        # call is sent trimmed, and cut short if the model is still writing at the deadline.
        engine.bound_calls(CallLimits(deadline=time.monotonic() + 0.575 * whole_s))
        step = await engine.extract(QUESTION, source, iteration=1)
    finally:
        await engine.aclose()
    try:
        await asyncio.wait_for(proxy.clients_gone(), ORPHAN_LIMIT_S)
    except TimeoutError:
        pytest.fail("the engine left a connection open")
    idle_after = llama.idle_within(ORPHAN_LIMIT_S)

    extract = proxy.chat_requests()[-1]
    assert "Research Tool step: extract." in extract["messages"][0]["content"]
    assert len(extract["messages"][1]["content"]) < len(text), "the source was sent whole"
    cut = bool(step.errors) and step.errors[0].error.type == "session_deadline"
    print(f"extract {'cut short at its deadline' if cut else 'answered in time'}; {speed:.0f} tokens/s measured")
    assert all(e.error.type in {"session_deadline", "engine_output"} for e in step.errors), step.errors
    assert step.tokens > 0, "a call sent counts its prompt against the budget, cut short or not"
    assert idle_after is not None, f"the server was still working {ORPHAN_LIMIT_S:.0f} s after the cancel"
