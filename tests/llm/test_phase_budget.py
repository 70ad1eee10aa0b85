"""Issue 35, a time budget by phase: the model steps before the first search (clarify, plan) use at most their
share of the session's time limit, the search always gets its turn, and the report says the model was slow
rather than blaming the providers."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from research_tool.demo_corpus import build_demo_corpus
from research_tool.graph.fallback_record import fallback_metadata
from research_tool.graph.nodes.instrumentation import pre_search_allowance_s
from tests.support.sessions import local_request, run_session
from tests.support.timing import LOAD_SLACK_S

from .conftest import llm_settings
from .servers import HANG, OpenAIServer, Reply

QUESTION = "How do I run a subprocess with a timeout and capture its output?"
SLOW_CLARIFY = '{"refined_query": "' + "subprocess timeout " * 40 + '", "domain": "technical"}'


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("phase_budget_corpus")
    build_demo_corpus(folder, modules=("subprocess",))
    return folder


def test_the_steps_before_the_search_get_a_third_of_the_limit_and_leave_the_search_its_reserve() -> None:
    assert pre_search_allowance_s(30) == pytest.approx(10)
    assert pre_search_allowance_s(120) == pytest.approx(40)
    assert pre_search_allowance_s(6) == pytest.approx(2)
    assert pre_search_allowance_s(4) == pytest.approx(4 / 3)  # a third; the reserve (2 s) leaves more


def test_searches_cut_off_by_the_time_limit_are_not_blamed_on_the_providers() -> None:
    calls = {f"1|local|q{i}": {"provider": "local", "ok": False, "error_type": "session_deadline"} for i in range(2)}
    error_log = {"plan:0:0": {"error": {"type": "session_deadline", "message": "plan: the model call was cancelled"}}}
    meta = fallback_metadata(
        error_log,
        search_limited=True,
        provider_calls=calls,
        phase_seconds={"clarify:0": 7.6, "plan:0": 2.4},
        time_limit_s=30,
    )
    assert meta["degraded_reason"] == (
        "The model took 10 s of 30 for clarifying and planning; search was limited: the session's time ran out "
        "before 2 of 2 searches finished; the offline engine also did plan."
    )
    assert "failed" not in meta["degraded_reason"]


@pytest.mark.slow
async def test_a_slow_clarify_is_cut_at_its_share_and_the_search_runs(corpus: Path, tmp_path: Path) -> None:
    limit_s = 6.0  # clarify and plan may use 2 s together
    with OpenAIServer() as server:
        server.script("clarify", Reply(SLOW_CLARIFY, trickle_s=0.1, trickle_bytes=4))  # about 20 s in all
        server.default("*", HANG)
        settings = llm_settings(
            "openai", server.base_url, data_dir=tmp_path / "data", llm_timeout_s=60.0, max_execution_time_s=limit_s
        )
        request = local_request(corpus, QUESTION, tier="standard")
        started = time.monotonic()
        result = await run_session(settings, request)
        elapsed = time.monotonic() - started
        (clarify,) = server.requests_for("clarify")
        assert clarify.disconnected.wait(5), "the cut-off clarify call's stream was not closed"

    assert result.record.status == "completed", result.record.error
    assert result.report is not None
    meta = result.report["metadata"]
    # an uncut clarify alone would use 20 s; a busy machine adds its slack to the steps after the cut
    assert meta["budget"]["time_s"]["used"] < limit_s + 4.0 + LOAD_SLACK_S, (
        f"the session's steps ran {elapsed:.1f} s in all"
    )
    assert meta["sources_retrieved"] >= 1, "search did not run"
    first = meta["fallbacks"][0]
    assert (first["step"], first["reason"]) == ("clarify", "session_deadline")
    assert "share of the time before the first search (2 s of 6) ran out" in first["message"]
    assert re.match(r"The model took \d+ s of 6 for clarifying and planning; ", meta["degraded_reason"])
    assert "searches failed" not in meta["degraded_reason"]
