"""Whole sessions through the graph with the LLM engine, against scripted OpenAI and Ollama servers:
plan → collect (local documents) → reflect → synthesize → export, citations resolving, forged and
unsupported citations removed, compaction under a small token budget."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from research_tool.demo_corpus import build_demo_corpus
from research_tool.graph.nodes import process
from research_tool.models.request import ResearchRequest
from tests.support.sessions import assert_citations_resolve, run_session

from .conftest import llm_settings
from .scripted_answers import script_session
from .servers import OllamaServer, OpenAIServer, ScriptedChatServer

QUESTION = "How do I run a subprocess with a timeout and capture its output?"
REJECTED_PHRASE = "run command with arguments"


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("llm_corpus")
    build_demo_corpus(folder, modules=("subprocess", "shlex", "signal"))
    return folder


@pytest.fixture(params=["openai", "ollama"])
def server(request: pytest.FixtureRequest) -> Iterator[ScriptedChatServer]:
    chat: ScriptedChatServer = OpenAIServer() if request.param == "openai" else OllamaServer()
    with chat:
        yield chat


def kind_of(server: ScriptedChatServer) -> str:
    return "openai" if isinstance(server, OpenAIServer) else "ollama"


def request_for(corpus: Path) -> ResearchRequest:
    return ResearchRequest(
        query=QUESTION,
        providers=["local"],
        corpus_dirs=[str(corpus)],
        fetch=False,
        privacy_mode="local_only",
        tier="simple",
    )


async def test_a_whole_session_runs_on_the_model(server: ScriptedChatServer, corpus: Path, tmp_path: Path) -> None:
    script_session(
        server,
        sufficient_after=2,
        extra_synthesis_sentence="Subprocesses also cure colds [99].",
        unsupported_claims=[REJECTED_PHRASE],
    )
    settings = llm_settings(kind_of(server), server.base_url, data_dir=tmp_path / "data", verify_citations="semantic")
    result = await run_session(settings, request_for(corpus))

    assert result.record.status == "completed", result.record.error
    report = result.report
    assert report is not None
    meta = report["metadata"]
    assert (meta["engine"], meta["model"]) == ("llm", f"{kind_of(server)}:test-model")
    assert meta["token_count"] > 0
    assert result.state.get("error_log") in ({}, None), "a step fell back to the offline engine"
    steps = {r.step for r in server.requests}
    assert {"clarify", "plan", "extract", "reflect", "synthesize", "citation_support"} <= steps
    assert report["citations"]
    assert_citations_resolve(report, result.state)
    # the forged [99] and the claims the model judged unsupported are gone, and counted
    texts = [report["answer"], *(f["statement"] for f in report["findings"])]
    assert all("cure colds" not in t and REJECTED_PHRASE not in t.casefold() for t in texts)
    rejected = [
        r for r in server.requests if r.step == "citation_support" and REJECTED_PHRASE in r.user_text.casefold()
    ]
    assert rejected, "the model was never asked about a claim it rejects"
    assert meta["citations_removed"] >= 2
    exports = Path(settings.data_dir) / "exports" / result.record.id
    assert (exports / f"{result.record.id}.json").exists()


async def test_a_small_token_budget_compacts_and_no_call_starts_that_the_budget_cannot_cover(
    server: ScriptedChatServer, corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Extractions run one at a time here: with several in flight, each reserves its bounded answer, so how
    # many are admitted before reflect would depend on scheduling, and this test is about the budget, not that.
    monkeypatch.setattr(process, "EXTRACT_CONCURRENCY", 1)
    script_session(server, sufficient_after=5)
    server.usage = (2000, 1000)  # every call costs 3,000 tokens
    # A call reserves its prompt plus a 4,096-token answer; the first cycle spends most of the budget, less
    # than 25% is left before reflect (compaction), and the calls the rest cannot cover are never sent.
    budget = 28_000
    settings = llm_settings(kind_of(server), server.base_url, data_dir=tmp_path / "data", token_budget=budget)
    result = await run_session(settings, request_for(corpus))

    assert result.record.status == "completed", result.record.error
    reasons = [e.data["reason"] for e in result.events if e.type == "compaction"]
    assert "token_budget_low" in reasons, (reasons, result.report and result.report["metadata"])
    assert result.report is not None
    meta = result.report["metadata"]
    assert meta["token_count"] == 3000 * len(server.requests) <= budget
    refused = [f for f in meta["fallbacks"] if f["reason"] == "token_budget"]
    assert refused, meta["fallbacks"]
    assert meta["degraded_mode"] is (refused[-1]["step"] == "synthesize")
