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
from typing import Any

import pytest

from research_tool.demo_corpus import build_demo_corpus
from research_tool.engines import chat_template
from research_tool.engines.base import FALLBACK_REASONS, CallLimits
from research_tool.engines.factory import MAX_ANSWER_TOKENS, create_engine
from research_tool.engines.llm import LLMEngine, _conversation, _prompt_text
from research_tool.engines.output_format import forget_servers
from research_tool.engines.prompt_templates import load_prompt, source_block
from research_tool.engines.prompt_timing import prompt_work
from research_tool.engines.structured_output import placeholder_problem
from research_tool.models.domain import DOMAINS
from research_tool.models.entities import SourceResult
from research_tool.models.schemas import PlanQuery
from tests.support.logs import LevelRecorder
from tests.support.sessions import local_request, run_session

from .conftest import llm_settings
from .fallback_engine import RecordingFallback
from .llama_server import MODEL_ALIAS, LlamaServer, RecordingProxy, missing_reason, model_without_template

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
    assert all(body["stream"] is True for body in chats)
    assert chats[0]["max_tokens"] == MAX_ANSWER_TOKENS, "before any answer is measured, the whole bound is asked"
    # later calls ask for what the server writes before the deadline (issue 43), in both fields it may read
    assert all(1 <= body["max_tokens"] <= MAX_ANSWER_TOKENS for body in chats)
    assert all(body.get("max_completion_tokens") == body["max_tokens"] for body in chats)
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


def _busy_until(until: float) -> None:
    """Hold the event loop (as a CPU-bound step on a crowded machine does) until `until`."""
    while time.monotonic() < until:
        pass


async def test_a_late_call_asks_only_the_answer_the_server_writes_before_the_deadline(
    llama: LlamaServer, proxy: RecordingProxy, tmp_path: Path
) -> None:
    """Issue 43: an extract sent 5 s before a 90 s deadline streamed 269 tokens past it; a client starved of CPU
    hangs up late, and until it does the server writes on. A call now asks for no more answer tokens than the
    server writes (at its measured answer speed) between the prompt's predicted end and the call's deadline, so
    the server stops by itself: here the client's loop is held from just before the deadline until the server is
    idle, which it is within 5 s all the same (before, it wrote on to its 4,096 tokens or the answer's end).
    SmolLM2 often ends its answer early (a placeholder the engine refuses): then the call ends before the
    deadline and the cap is seen only in the request."""
    settings = _settings(proxy, tmp_path, llm_timeout_s=300.0)
    engine = create_engine(settings, privacy_mode="local_only", fallback=RecordingFallback())  # type: ignore[arg-type]
    assert isinstance(engine, LLMEngine)
    timing = engine._requests.timing
    text = " ".join(f"Fact {i}: subprocess.run(args, timeout={i}) raises TimeoutExpired after {i} s." for i in range(6))
    source = SourceResult(url="https://example.org/sp", title="subprocess", source_name="local", full_content=text)
    try:
        for _ in range(3):  # the answers measure the server's answer speed (a short one measures nothing)
            await engine.plan(QUESTION, DOMAINS["technical"], 5)
            if timing.answer_tokens_per_s is not None:
                break
        speed = timing.answer_tokens_per_s
        assert speed is not None, "no answer was long enough to measure the server's answer speed"
        prompt_s = timing.predict(_extract_prompt(source)) or 0.0
        # time for some answer tokens, never for a whole 4,096-token answer; and at least as long as the prompt
        # (a prompt may take half of a call's time: `PROMPT_TIME_SHARE`)
        answer_s = max(4.0, prompt_s + 0.5)
        deadline = time.monotonic() + prompt_s + answer_s
        engine.bound_calls(CallLimits(deadline=deadline))
        loop = asyncio.get_running_loop()
        loop.call_at(deadline - 0.5, _busy_until, deadline + 1.0)  # the client cannot hang up at the deadline
        idle: list[float | None] = []  # measured with the loop still held: the client has not hung up
        loop.call_at(deadline + 1.0, lambda: idle.append(llama.idle_within(ORPHAN_LIMIT_S)))
        step = await engine.extract(QUESTION, source, iteration=1)
        if not idle:  # the answer ended before the deadline: the server is idle now
            idle.append(llama.idle_within(ORPHAN_LIMIT_S))
    finally:
        await engine.aclose()

    extract = proxy.chat_requests()[-1]
    assert "Research Tool step: extract." in extract["messages"][0]["content"]
    asked = extract["max_tokens"]
    print(f"answer speed {speed:.1f} tokens/s; extract asked for {asked} tokens; errors {step.errors}")
    assert asked < MAX_ANSWER_TOKENS, "a call with seconds left asked for a whole answer"
    assert asked <= speed * answer_s * 1.5 + 1
    assert extract.get("max_completion_tokens", asked) == asked
    assert idle and idle[0] is not None, f"the server was still writing {ORPHAN_LIMIT_S:.0f} s after the deadline"


def _extract_prompt(source: SourceResult) -> str:
    """The whole extract conversation as the engine sends it for `source`, to predict its evaluation."""
    rendered = load_prompt("extract").render(
        query=QUESTION,
        source=source_block(1, source.text(), title=source.title, url=source.url, max_chars=6000),
        max_facts=8,
        max_entities=12,
    )
    return _prompt_text(_conversation(rendered))


@pytest.fixture(scope="module")
def base_llama(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    """The same model with its chat template taken out, as a base model ships (Gemma 3 270M in issue 43)."""
    folder = tmp_path_factory.mktemp("llama_base")
    server = LlamaServer.start(folder / "server.log", model=model_without_template(folder), measure=False)
    try:
        yield server
    finally:
        server.stop()


async def test_a_model_without_a_chat_template_is_said_once_in_the_log_and_in_each_report(
    base_llama: LlamaServer, llama: LlamaServer, corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """llama-cpp-python formats the conversation for a model without a chat template in llama-2's form, without
    a word (issue 43: Gemma 3 270M was used so); the engine sees it at preflight: one warning in the log however
    many sessions use the server, and a note in each report (`metadata.model_notes`, a line in the md). A model
    with its template (SmolLM2 as shipped) gets no note."""
    recorder = LevelRecorder()
    monkeypatch.setattr(chat_template, "log", recorder)
    forget_servers()

    def settings_for(server: LlamaServer, data: str) -> Any:
        settings = llm_settings(
            "openai", server.base_url, data_dir=tmp_path / data, llm_speed_probe=True, max_execution_time_s=20.0
        )
        return settings.model_copy(update={"llm": f"openai:{MODEL_ALIAS}"})

    request = local_request(corpus, QUESTION, tier="simple", clarify=False, formats=["md"])
    try:
        first = await run_session(settings_for(base_llama, "a"), request)
        second = await run_session(settings_for(base_llama, "b"), request)
        engine = create_engine(settings_for(llama, "c"), privacy_mode="local_only")
        assert isinstance(engine, LLMEngine)
        try:
            await engine.check()
        finally:
            await engine.aclose()
    finally:
        forget_servers()

    note = chat_template.no_template_note(MODEL_ALIAS)
    for result in (first, second):
        assert result.report is not None, result.record.error
        assert result.report["metadata"]["model_notes"] == [note]
    assert [call for call in recorder.calls if call[1] == "llm_no_chat_template"] == [
        ("warning", "llm_no_chat_template")
    ]
    assert engine.notes == [], "SmolLM2 with its own template was taken for a model without one"
    exports = tmp_path / "a" / "exports" / first.record.id
    markdown = next(exports.glob("*.md")).read_text(encoding="utf-8")
    assert f"model: The model {MODEL_ALIAS} has no chat template" in markdown
