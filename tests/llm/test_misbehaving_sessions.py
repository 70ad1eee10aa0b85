"""Issue 14, whole sessions: a model that fails every step, or hangs, still gives a report on time that says
it is degraded and why (metadata.fallbacks, degraded_mode, a model_fallback event per fallback, a line in the
md and html exports), with search done; `metadata.duration_s` is the session's whole wall time."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from research_tool.demo_corpus import build_demo_corpus
from research_tool.graph.nodes import export as export_node_module
from research_tool.models.request import ResearchRequest
from research_tool.reporting.export import export_report
from tests.support.sessions import local_request, run_session
from tests.support.timing import LOAD_SLACK_S

from .conftest import llm_settings
from .scripted_answers import script_session
from .servers import HANG, OllamaServer, OpenAIServer, Reply

QUESTION = "How do I run a subprocess with a timeout and capture its output?"


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("misbehaving_corpus")
    build_demo_corpus(folder, modules=("subprocess", "shlex"))
    return folder


def request_for(corpus: Path, **overrides: object) -> ResearchRequest:
    return local_request(corpus, QUESTION, **({"tier": "simple", "formats": ["md", "html", "json"]} | overrides))


async def test_every_step_failing_is_reported_as_fallbacks_events_and_export_lines(
    corpus: Path, tmp_path: Path
) -> None:
    with OpenAIServer() as server:
        server.default("*", Reply("upstream exploded", status=500))
        server.script("plan", "not json at all", '{"queries": [')  # invalid twice
        settings = llm_settings("openai", server.base_url, data_dir=tmp_path / "data")
        result = await run_session(settings, request_for(corpus))

    assert result.record.status == "completed", result.record.error
    assert result.report is not None
    meta = result.report["metadata"]
    assert meta["engine"] == "llm"
    assert meta["degraded_mode"] is True, "the answer was not written by the model"
    assert "did not write the answer" in meta["degraded_reason"]
    steps = [(f["step"], f["reason"]) for f in meta["fallbacks"]]
    assert ("clarify", "engine_unavailable") in steps
    assert ("plan", "engine_output") in steps
    assert steps[-1][0] == "synthesize"
    assert any(f["step"] == "extract" and f["source"] for f in meta["fallbacks"])
    events = [e for e in result.events if e.type == "model_fallback"]
    assert len(events) == len(meta["fallbacks"])
    assert [(e.data["step"], e.data["reason"]) for e in events] == steps
    exports = Path(settings.data_dir) / "exports" / result.record.id
    markdown = next(exports.glob("*.md")).read_text(encoding="utf-8")
    html = next(exports.glob("*.html")).read_text(encoding="utf-8")
    for text in (markdown, html):
        assert f"model fallbacks: {len(steps)} step(s) done by the offline engine" in text
        assert "degraded: The model did not write the answer" in text
        assert "upstream exploded" not in text  # reason codes only, never the server's words


@pytest.mark.slow
@pytest.mark.parametrize("server_class", [OpenAIServer, OllamaServer])
async def test_a_hanging_model_ends_at_the_time_limit_with_search_done_and_degraded(
    server_class: type[OpenAIServer] | type[OllamaServer], corpus: Path, tmp_path: Path
) -> None:
    limit_s = 4.0  # the model steps before the first search leave it 2 s
    with server_class() as server:
        server.default("*", HANG)
        settings = llm_settings(
            "openai" if server_class is OpenAIServer else "ollama",
            server.base_url,
            data_dir=tmp_path / "data",
            llm_timeout_s=60.0,
            max_execution_time_s=limit_s,
        )
        started = time.monotonic()
        result = await run_session(settings, request_for(corpus, tier="standard"))
        elapsed = time.monotonic() - started

    assert result.record.status == "completed", result.record.error
    assert elapsed < limit_s + 4.0 + LOAD_SLACK_S, f"the session took {elapsed:.1f} s against a {limit_s} s limit"
    assert result.report is not None
    meta = result.report["metadata"]
    assert meta["provider_calls"] >= 1 and meta["sources_retrieved"] >= 1, "search did not run"
    assert meta["degraded_mode"] is True
    assert {f["reason"] for f in meta["fallbacks"]} == {"session_deadline"}
    # Once the model has shown no first token within the time it had, prompts it could not evaluate in the time
    # left are not sent (issue 35): those steps are done offline at once, so the session may end before its limit.
    assert result.report["stop_reason"] in {"max_execution_time", "sufficient"}
    first = server.requests[0]  # clarify: the session's clock starts with it
    late = [r.step for r in server.requests if r.received > first.received + limit_s + 0.5]
    assert not late, f"model calls started after the session's deadline: {late}"


async def test_duration_is_the_whole_wall_time_of_the_session(
    corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`duration_s` is read in export, before the files are written: it covers every node before export. Writing
    the files is made slow here (as a loaded machine makes it): that time is after the reading and not in it, so
    the check compares the duration with the nodes that ran before it was read (issue 43: `assert 1.311 >= 1.423`
    at load 9 compared it with a sum that included export's own writing)."""

    async def slow_export(*args: object, **kwargs: object) -> Path:
        await asyncio.sleep(0.5)  # stands for a loaded disk or CPU; not a synchronisation
        return await export_report(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(export_node_module, "export_report", slow_export)
    with OpenAIServer() as server:
        script_session(server)
        settings = llm_settings("openai", server.base_url, data_dir=tmp_path / "data")
        started = time.monotonic()
        result = await run_session(settings, request_for(corpus))
        wall_s = time.monotonic() - started

    assert result.report is not None
    elapsed = result.state["elapsed"]
    before_export = sum(seconds for key, seconds in elapsed.items() if not key.startswith("export:"))
    duration = result.report["metadata"]["duration_s"]
    assert duration >= round(before_export, 3), (duration, elapsed)  # synthesize included
    assert duration <= wall_s, "the duration is a span inside the session, not more than its wall time"
    assert result.state["final_report"]["metadata"]["duration_s"] == duration
