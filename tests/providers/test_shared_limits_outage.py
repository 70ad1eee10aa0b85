"""Redis down mid-run: provider calls neither hang nor fail; the process's own limiter spaces them (never "no
limit"), one warning says so, and the shared limits come back when Redis does."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable

import httpx
import pytest
from structlog.testing import capture_logs

from research_tool.core.settings import Settings
from research_tool.providers.gateway import SearchGateway
from research_tool.providers.resilience import shared_limits
from research_tool.providers.resilience.rate_limiter import RATE_LIMITERS, provider_limiter
from research_tool.providers.search.semantic_scholar import SemanticScholarProvider
from research_tool.runtime.shared_limits import open_shared_limits
from tests.support.redis_service import private_redis_server, unique_prefix
from tests.support.timing import LOAD_SLACK_S

from .recordings import vcr_interactions
from .replay import ReplayServer

SEARCH_PATH = "/graph/v1/paper/search"


async def test_redis_dying_mid_run_falls_back_to_the_process_limiter(
    replay: ReplayServer,
    make_settings: Callable[..., Settings],
    client: httpx.AsyncClient,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pytest.importorskip("redis.asyncio", reason="the 'redis' extra is not installed")
    from redis.asyncio import Redis

    monkeypatch.setattr(shared_limits, "RETRY_AFTER_S", 0.2)  # ask a restarted Redis again soon
    replay.route(SEARCH_PATH, vcr_interactions("semantic_scholar", "test_search_paper.yaml")[0].reply())
    with private_redis_server() as (url, server):
        prefix = unique_prefix()
        settings = make_settings(semantic_scholar_rps=10.0, redis_url=url, redis_prefix=prefix)
        provider = SemanticScholarProvider(settings, client)
        gateway = SearchGateway()
        async with open_shared_limits(settings) as shared:
            assert shared is not None and RATE_LIMITERS.shared is shared
            limiter = provider_limiter(provider)
            assert limiter.shared is shared

            async def searches(count: int) -> None:
                deadline = time.monotonic() + 20
                outcomes = await asyncio.gather(
                    *(gateway.search(provider, f"q{i}", 3, deadline=deadline) for i in range(count))
                )
                assert all(o.ok for o in outcomes), [o.failure for o in outcomes]

            await searches(2)
            redis = Redis.from_url(url)
            assert await redis.exists(shared.spacing_key(limiter.name), shared.breaker_key(limiter.name)) == 2
            await redis.aclose()

            server.kill()
            server.wait()
            before = len(replay.requests_for(SEARCH_PATH))
            with capture_logs() as logs:
                started = time.monotonic()
                await searches(4)
                elapsed = time.monotonic() - started

    # no hang (the calls' deadline is 20 s): four calls 0.1 s apart, plus at most one Redis timeout, plus slack
    assert elapsed < 4 * limiter.interval + shared_limits.CALL_TIMEOUT_S + LOAD_SLACK_S, elapsed
    # still limited: the process's own spacing held them apart
    arrivals = sorted(r.at for r in replay.requests_for(SEARCH_PATH))[before:]
    assert len(arrivals) == 4
    gaps = [b - a for a, b in itertools.pairwise(arrivals)]
    assert min(gaps) >= limiter.interval - 0.02, gaps
    warnings = [e for e in logs if e["event"] == "shared_limits_unavailable"]
    assert len(warnings) == 1 and warnings[0]["log_level"] == "warning"
    # closed: the registries are back to in-process limits
    assert RATE_LIMITERS.shared is None and limiter.shared is None


async def test_redis_url_without_the_redis_extra_is_one_line_of_bad_input(
    make_settings: Callable[..., Settings], monkeypatch: pytest.MonkeyPatch
) -> None:
    from research_tool.core import extras

    monkeypatch.setattr(extras, "module_installed", lambda module: module != "redis")
    settings = make_settings(redis_url="redis://127.0.0.1:6379/0")
    with pytest.raises(extras.MissingExtraError, match=r"RESEARCH_REDIS_URL needs the 'redis' extra"):
        async with open_shared_limits(settings):
            pass
    assert RATE_LIMITERS.shared is None


async def test_without_redis_url_nothing_is_shared(make_settings: Callable[..., Settings]) -> None:
    async with open_shared_limits(make_settings()) as shared:
        assert shared is None and RATE_LIMITERS.shared is None
