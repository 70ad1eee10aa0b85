"""The crawler: main-text extraction, SSRF refusals, obstacles (CAPTCHA, paywall -> open access), limits."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import httpx
import pytest

from research_tool.core.errors import AccessDeniedError, FetchRefusedError, ProviderResponseError
from research_tool.core.settings import Settings
from research_tool.models.entities import SourceResult
from research_tool.providers.fetching.crawler import Crawler
from research_tool.providers.fetching.full_text import fetch_full_text
from research_tool.providers.fetching.open_access import fetch_open_access
from research_tool.providers.memory import MemoryStore
from research_tool.providers.search.unpaywall import UnpaywallProvider

from .recordings import raw_bytes, raw_json
from .replay import ReplayServer, Reply

HTML = "text/html; charset=utf-8"
SOON = 10.0

ARTICLE_TEXT = (
    "Nanometre-scale thermometry in a living cell. Sensitive probing of temperature variations on nanometre "
    "scales is an outstanding challenge in many areas of modern science and technology. Here we demonstrate "
    "the use of quantum coherent manipulation of nitrogen-vacancy colour centres in nanodiamonds to measure "
    "temperature with a precision of a few millikelvin. "
)
OPEN_ACCESS_PAGE = (
    "<html><head><title>Open copy</title></head><body><article><h1>Nanometre-scale thermometry</h1>"
    f"<p>{ARTICLE_TEXT * 3}</p></article></body></html>"
)
PAYWALLED_PAGE = """<html><head><title>Nanometre-scale thermometry | Nature</title>
<script type="application/ld+json">{"@type": "ScholarlyArticle", "isAccessibleForFree": false}</script></head>
<body><article><h1>Nanometre-scale thermometry in a living cell</h1><p>Sensitive probing of temperature...</p>
<div class="paywall">Subscribe to continue reading. Access through your institution or buy this article.</div>
</article></body></html>"""
CAPTCHA_PAGE = """<!DOCTYPE html><html><head><title>Just a moment...</title></head><body>
<div id="challenge-stage">Verify you are human by completing the action below.</div>
<script src="/cdn-cgi/challenge-platform/h/g/orchestrate/chl_page/v1"></script></body></html>"""


@pytest.fixture
async def crawler(make_settings: Callable[..., Settings], client: httpx.AsyncClient) -> AsyncIterator[Crawler]:
    """A crawler that may fetch from the 127.0.0.1 replay server (tests only)."""
    async with Crawler(make_settings(), client, allow_private_hosts=True) as c:
        yield c


@pytest.fixture
def target() -> ReplayServer:
    """A second local server that must never be reached by the SSRF cases."""
    with ReplayServer() as server:
        server.route("/secret", Reply(200, body="internal admin page", content_type=HTML))
        yield server


async def test_extracts_the_recorded_page(replay: ReplayServer, crawler: Crawler) -> None:
    replay.route(
        "/2016/12/python-360-is-now-available.html",
        Reply(200, body=raw_bytes("web_fetch", "blog.python.org.html"), content_type=HTML),
    )
    url = f"{replay.base_url}/2016/12/python-360-is-now-available.html"

    page = await crawler.fetch(url, deadline=time.monotonic() + SOON)

    # expectations from trafilatura's realworld tests for this page (fixtures/web_fetch/SOURCE.md)
    assert page.title == "Python 3.6.0 is now available!"
    assert "Python 3.6.0 is the newest major release of the Python language" in page.text[:200]
    assert "You can download Python 3.6.0 here." in page.text
    assert "<div" not in page.text and "Blogger" not in page.text[:200]
    assert (page.backend, page.content_type, page.final_url) == ("httpx", "text/html", url)


async def test_follows_redirects_and_reports_the_final_url(replay: ReplayServer, crawler: Crawler) -> None:
    replay.route("/old", Reply(301, headers={"Location": "/new"}))
    replay.route("/new", Reply(200, body=OPEN_ACCESS_PAGE, content_type=HTML))
    page = await crawler.fetch(f"{replay.base_url}/old", deadline=time.monotonic() + SOON)
    assert page.final_url == f"{replay.base_url}/new" and "nitrogen-vacancy" in page.text


async def test_ssrf_targets_are_refused_and_never_contacted(
    target: ReplayServer, replay: ReplayServer, make_settings: Callable[..., Settings], client: httpx.AsyncClient
) -> None:
    async def intranet_resolver(host: str, port: int) -> list[str]:
        return ["127.0.0.1"] if host == "intranet.example" else ["93.184.215.14"]

    # The redirector stands in for a public site: the operator-trusted origin list admits it, nothing else.
    replay.route("/to-loopback", Reply(302, headers={"Location": f"http://127.0.0.1:{target.port}/secret"}))
    replay.route("/to-localhost", Reply(302, headers={"Location": f"http://localhost:{target.port}/secret"}))
    settings = make_settings()
    default = Crawler(settings, client)
    with_resolver = Crawler(settings, client, resolver=intranet_resolver)
    with_public_redirector = Crawler(settings, client, trusted_origins={f"127.0.0.1:{replay.port}"})
    deadline = time.monotonic() + SOON

    cases = [
        (default, f"http://127.0.0.1:{target.port}/secret"),
        (default, "http://10.0.0.1/secret"),
        (default, "http://169.254.169.254/latest/meta-data/"),
        (default, "file:///etc/passwd"),
        (default, f"http://localhost:{target.port}/secret"),
        (default, f"http://[::1]:{target.port}/secret"),
        (default, f"http://[::ffff:127.0.0.1]:{target.port}/secret"),
        (default, "gopher://127.0.0.1:70/"),
        (with_resolver, f"http://intranet.example:{target.port}/secret"),
        (with_public_redirector, f"{replay.base_url}/to-loopback"),
        (with_public_redirector, f"{replay.base_url}/to-localhost"),
    ]
    for crawler, url in cases:
        with pytest.raises(FetchRefusedError):
            await crawler.fetch(url, deadline=deadline)

    assert target.requests == []
    assert [r.path for r in replay.requests] == [
        "/to-loopback",
        "/to-localhost",
    ]  # the redirects were served, not followed


async def test_non_text_and_oversized_bodies_are_refused(replay: ReplayServer, crawler: Crawler) -> None:
    replay.route("/image.png", Reply(200, body=b"\x89PNG\r\n\x1a\n" + b"0" * 100, content_type="image/png"))
    replay.route(
        "/huge.html", Reply(200, body=b"<html><body>" + b"a" * (5 * 1024 * 1024) + b"</body></html>", content_type=HTML)
    )
    deadline = time.monotonic() + SOON
    with pytest.raises(FetchRefusedError, match="not text"):
        await crawler.fetch(f"{replay.base_url}/image.png", deadline=deadline)
    with pytest.raises(FetchRefusedError, match="exceeds"):
        await crawler.fetch(f"{replay.base_url}/huge.html", deadline=deadline)


async def test_missing_page_is_a_typed_error(replay: ReplayServer, crawler: Crawler) -> None:
    with pytest.raises(ProviderResponseError, match="404"):
        await crawler.fetch(f"{replay.base_url}/nowhere", deadline=time.monotonic() + SOON)


async def test_captcha_page_is_a_recorded_failure_and_the_snippet_is_kept(
    replay: ReplayServer, crawler: Crawler, tmp_path: Path
) -> None:
    replay.route("/challenge", Reply(403, body=CAPTCHA_PAGE, content_type=HTML))
    replay.route(
        "/soft-challenge",
        Reply(
            200, body='<html><body><div class="g-recaptcha" data-sitekey="x"></div></body></html>', content_type=HTML
        ),
    )
    deadline = time.monotonic() + SOON
    with pytest.raises(AccessDeniedError, match="CAPTCHA"):
        await crawler.fetch(f"{replay.base_url}/soft-challenge", deadline=deadline)

    source = SourceResult(
        url=f"{replay.base_url}/challenge",
        title="Blocked page",
        snippet="the search snippet",
        source_name="brave",
        query="q",
    )
    outcome = await fetch_full_text(source, crawler=crawler, deadline=deadline, iteration=2)

    assert outcome.text_from == "snippet"
    assert outcome.source.snippet == "the search snippet" and outcome.source.full_content is None
    [failure] = outcome.failures
    assert (failure.provider, failure.url, failure.error_type, failure.iteration) == (
        "crawler",
        source.url,
        "access_denied",
        2,
    )
    assert "CAPTCHA" in failure.message
    memory = MemoryStore(tmp_path / "memory.db")
    await memory.record_failure("general", failure)
    assert [f.error_type for f in await memory.failures(5)] == ["access_denied"]
    assert len(replay.requests_for("/challenge")) == 1  # access denied is not retried


async def test_paywalled_doi_falls_back_to_unpaywalls_open_access_copy(
    replay: ReplayServer, crawler: Crawler, make_settings: Callable[..., Settings], client: httpx.AsyncClient
) -> None:
    record = raw_json("unpaywall", "unpaywall_10_1038_nature12373.json")
    open_copy = f"{replay.base_url}/bitstream/1/12285462/Nanometer-Scale-Thermometry.html"
    record["best_oa_location"]["url"] = open_copy  # the recorded record, its best location moved onto the replay server
    replay.route("/v2/10.1038/nature12373", Reply(200, body=json.dumps(record), content_type="application/json"))
    replay.route("/articles/nature12373", Reply(200, body=PAYWALLED_PAGE, content_type=HTML))
    replay.route(
        "/bitstream/1/12285462/Nanometer-Scale-Thermometry.html", Reply(200, body=OPEN_ACCESS_PAGE, content_type=HTML)
    )
    unpaywall = UnpaywallProvider(make_settings(unpaywall_email="me@example.org"), client)
    source = SourceResult(
        url=f"{replay.base_url}/articles/nature12373",
        title="Nanometre-scale thermometry",
        snippet="teaser",
        source_name="semantic_scholar",
        doi="10.1038/nature12373",
    )

    outcome = await fetch_full_text(source, crawler=crawler, unpaywall=unpaywall, deadline=time.monotonic() + SOON)

    assert outcome.text_from == "open_access" and outcome.fetched_url == open_copy
    assert outcome.source.full_content is not None and "nitrogen-vacancy colour centres" in outcome.source.full_content
    assert outcome.source.url == source.url  # still the paper's own source
    assert [(f.error_type, "paywall" in f.message) for f in outcome.failures] == [("access_denied", True)]
    assert len(replay.requests_for("/bitstream/1/12285462/Nanometer-Scale-Thermometry.html")) == 1


async def test_open_access_without_a_copy_reports_nothing_fetched(
    replay: ReplayServer, crawler: Crawler, make_settings: Callable[..., Settings], client: httpx.AsyncClient
) -> None:
    replay.route(
        "/v2/10.9999/closed",
        Reply(200, body={"doi": "10.9999/closed", "is_oa": False, "best_oa_location": None, "oa_locations": []}),
    )
    unpaywall = UnpaywallProvider(make_settings(unpaywall_email="me@example.org"), client)
    result = await fetch_open_access(
        "10.9999/closed", unpaywall=unpaywall, crawler=crawler, deadline=time.monotonic() + SOON
    )
    assert result.page is None and result.failures == []
    no_email = await fetch_open_access(
        "10.9999/closed",
        unpaywall=UnpaywallProvider(make_settings(), client),
        crawler=crawler,
        deadline=time.monotonic() + SOON,
    )
    assert [f.error_type for f in no_email.failures] == ["provider_unavailable"]
