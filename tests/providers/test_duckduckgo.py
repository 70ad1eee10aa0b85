"""DuckDuckGo through ddgs's own engine and HTML parser, pointed at the replay server.

No DuckDuckGo response was recorded (see tests/fixtures/README.md), so the page below is constructed in
the markup ddgs's Duckduckgo engine parses (html.duckduckgo.com/html/: result bodies under
`div.result__body` with an `h2` title and an `a` link and snippet)."""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest

from research_tool.core.errors import RateLimitError
from research_tool.core.settings import Settings
from research_tool.providers.search.duckduckgo import DuckDuckGoProvider, normalize_results

from .replay import ReplayServer, Reply

RESULTS_PAGE = """<!DOCTYPE html><html><body><div class="serp__results"><div class="results">
<div class="result results_links results_links_deep web-result"><div class="links_main links_deep result__body">
  <h2 class="result__title"><a class="result__a"
    href="https://docs.python.org/3/library/subprocess.html?utm_source=ddg#timeout"
    >subprocess \u2014 Subprocess management</a></h2>
  <a class="result__snippet"
    href="https://docs.python.org/3/library/subprocess.html"
    >The <b>subprocess</b> module allows you to spawn new processes; <b>timeout</b> kills the child.</a>
</div></div>
<div class="result results_links results_links_deep web-result"><div class="links_main links_deep result__body">
  <h2 class="result__title"><a class="result__a"
    href="https://stackoverflow.com/questions/1191374">Using module subprocess with timeout</a></h2>
  <a class="result__snippet"
    href="https://stackoverflow.com/questions/1191374">Use <b>subprocess.run</b> with the timeout argument.</a>
</div></div>
</div></div></body></html>"""


async def test_duckduckgo_uses_ddgs_engine_against_base_url(
    replay: ReplayServer, make_settings: Callable[..., Settings]
) -> None:
    replay.route("/html/", Reply(200, body=RESULTS_PAGE, content_type="text/html; charset=utf-8"), method="POST")
    provider = DuckDuckGoProvider(make_settings(), httpx.AsyncClient())

    results = await provider.search("python subprocess timeout", max_results=5)

    assert [r.title for r in results] == [
        "subprocess \u2014 Subprocess management",
        "Using module subprocess with timeout",
    ]
    assert results[0].url == "https://docs.python.org/3/library/subprocess.html"
    assert results[0].snippet == "The subprocess module allows you to spawn new processes; timeout kills the child."
    assert results[1].rank == 2 and results[1].source_name == "duckduckgo"
    sent = replay.requests_for("/html/")[0]
    assert b"q=python+subprocess+timeout" in sent.body


async def test_duckduckgo_anomaly_page_is_a_rate_limit(
    replay: ReplayServer, make_settings: Callable[..., Settings]
) -> None:
    replay.route("/html/", Reply(202, body="<html>anomaly</html>", content_type="text/html"), method="POST")
    with pytest.raises(RateLimitError):
        await DuckDuckGoProvider(make_settings(), httpx.AsyncClient()).search("q")


def test_normalize_results_accepts_ddgs_dicts() -> None:
    items = [
        {"title": "A &amp; B", "href": "HTTPS://Example.COM/a?fbclid=1", "body": "<b>x</b> y"},
        {"title": "no link", "href": "", "body": ""},
        {"title": "ad", "href": "javascript:void(0)", "body": ""},
    ]
    results = normalize_results(items, "q", 10)
    assert [(r.title, r.url, r.snippet) for r in results] == [("A & B", "https://example.com/a", "x y")]
