"""RESEARCH_REDIS_URL set but Redis unreachable: the session still completes, on the process's own limits (the
in-process breaker still opens for a failing provider), with a warning instead of a crash or a hang."""

from __future__ import annotations

from pathlib import Path

import pytest
from structlog.testing import capture_logs

from research_tool.core.settings import Settings
from research_tool.models.request import ResearchRequest
from tests.support.counting_server import counting_server
from tests.support.redis_service import free_port, unique_prefix
from tests.support.sessions import assert_citations_resolve, run_session

QUESTION = "How do I run a subprocess with a timeout and capture its output?"


async def test_a_session_completes_on_in_process_limits_when_redis_is_unreachable(
    tmp_path: Path, stdlib_corpus: Path
) -> None:
    pytest.importorskip("redis.asyncio", reason="the 'redis' extra is not installed")
    closed_port_url = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there
    with counting_server(status=500) as (url, counter):
        settings = Settings(
            data_dir=tmp_path / "data",
            wikipedia_base_url=url,
            wikipedia_rps=100.0,
            redis_url=closed_port_url,
            redis_prefix=unique_prefix(),
        )
        request = ResearchRequest(
            query=QUESTION, providers=["local", "wikipedia"], corpus_dirs=[str(stdlib_corpus)], fetch=False
        )
        with capture_logs() as logs:
            result = await run_session(settings, request)
    assert result.record.status == "completed" and result.report is not None
    assert_citations_resolve(result.report, result.state)
    wiki_calls = [c for c in result.state["provider_calls"].values() if c["provider"] == "wikipedia"]
    assert any(c["error_type"] == "circuit_open" for c in wiki_calls), "the in-process breaker never opened"
    assert 5 <= counter.count <= 10
    assert [e["event"] for e in logs].count("shared_limits_unavailable") >= 1
