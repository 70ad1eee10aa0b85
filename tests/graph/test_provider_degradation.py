"""A failing provider degrades a session but never stops it; local_only never reaches a cloud provider."""

from __future__ import annotations

from pathlib import Path

import pytest

from research_tool.core.settings import Settings
from research_tool.models.request import ResearchRequest
from research_tool.providers.registry import PROVIDER_CLASSES, provider_class
from tests.support.counting_server import counting_server
from tests.support.sessions import assert_citations_resolve, run_session

QUESTION = "How do I run a subprocess with a timeout and capture its output?"


async def test_circuit_breaker_opens_and_the_session_completes_without_that_provider(
    tmp_path: Path, stdlib_corpus: Path
) -> None:
    with counting_server(status=500) as (url, counter):
        settings = Settings(data_dir=tmp_path / "data", wikipedia_base_url=url, wikipedia_rps=100.0)
        request = ResearchRequest(
            query=QUESTION,
            providers=["local", "wikipedia"],
            corpus_dirs=[str(stdlib_corpus)],
            fetch=False,
        )
        result = await run_session(settings, request)
    report = result.report
    assert result.record.status == "completed" and report is not None
    assert report["citations"] and all(c["provider"] == "local" for c in report["citations"])
    assert_citations_resolve(report, result.state)
    wiki_calls = [c for c in result.state["provider_calls"].values() if c["provider"] == "wikipedia"]
    assert wiki_calls and not any(c["ok"] for c in wiki_calls)
    assert any(c["error_type"] == "circuit_open" for c in wiki_calls), "the breaker never opened"
    # Once open, calls stop at the breaker: 5 failures open it (a few more may already be in flight),
    # far fewer than the calls the session made.
    assert 5 <= counter.count <= 10
    assert len(wiki_calls) > counter.count
    assert report["metadata"]["access_failures"] >= 1
    assert report["metadata"]["degraded_mode"] is False  # local kept answering


@pytest.mark.slow
async def test_local_only_sends_zero_requests_to_cloud_providers(tmp_path: Path, stdlib_corpus: Path) -> None:
    cloud = [name for name in PROVIDER_CLASSES if provider_class(name).privacy == "cloud"]
    with counting_server(status=200, body=b"{}") as (url, counter):
        overrides: dict[str, object] = {f"{name}_base_url": url for name in cloud}
        overrides |= {"tavily_api_key": "k", "exa_api_key": "k", "brave_api_key": "k", "unpaywall_email": "a@b.c"}
        settings = Settings(data_dir=tmp_path / "data", **overrides)
        for domain in ("general", "academic", "technical"):
            request = ResearchRequest(
                query=QUESTION,
                privacy_mode="local_only",
                domain=domain,
                corpus_dirs=[str(stdlib_corpus)],
            )
            result = await run_session(settings, request)
            assert result.report is not None
            assert {c["provider"] for c in result.report["citations"]} == {"local"}
            assert set(result.state["providers"]) == {"local"}
    assert counter.count == 0
