"""The crawler's Playwright backend renders a page whose text only JavaScript writes, in Debian's
Chromium (/usr/bin/chromium). Skips, saying why, only where no Chromium (or no playwright) exists."""

from __future__ import annotations

import json
import time
from collections.abc import Callable

import httpx
import pytest

from research_tool.core.errors import FetchRefusedError, ProviderResponseError
from research_tool.core.settings import Settings
from research_tool.providers.fetching.browser import browser_unavailable_reason
from research_tool.providers.fetching.crawler import Crawler

from .replay import ReplayServer, Reply

UNAVAILABLE = browser_unavailable_reason()
pytestmark = pytest.mark.skipif(UNAVAILABLE is not None, reason=f"no browser for the Playwright backend: {UNAVAILABLE}")

SENTENCES = [
    "The rendered paragraph describes how the crawler waits for scripts before reading the page.",
    "Only JavaScript writes this text, so a plain HTTP fetch sees an empty application shell.",
    "Headless Chromium executes the bundle, and trafilatura then extracts the main text as usual.",
    "Every request the page makes is answered by the guarded downloader, never by the browser itself.",
]
SHELL = """<!DOCTYPE html><html><head><title>Rendered by script</title></head><body>
<div id="app"></div>
<script src="/static/app.js"></script>
</body></html>"""
APP_JS = """
const sentences = SENTENCES_JSON;
const article = document.createElement("article");
const heading = document.createElement("h1");
heading.textContent = "Written by JavaScript";
article.appendChild(heading);
for (const s of sentences) { const p = document.createElement("p"); p.textContent = s; article.appendChild(p); }
document.getElementById("app").appendChild(article);
fetch("http://169.254.169.254/latest/meta-data/").catch(() => {});
""".replace("SENTENCES_JSON", json.dumps(SENTENCES))


@pytest.fixture
def js_site(replay: ReplayServer) -> ReplayServer:
    replay.route("/app", Reply(200, body=SHELL, content_type="text/html; charset=utf-8"))
    replay.route("/static/app.js", Reply(200, body=APP_JS, content_type="application/javascript"))
    return replay


@pytest.mark.slow
async def test_browser_renders_javascript_written_text(
    js_site: ReplayServer, make_settings: Callable[..., Settings], client: httpx.AsyncClient
) -> None:
    # only the replay server's origin is trusted: the script's fetch of 169.254.169.254 stays refused
    async with Crawler(make_settings(), client, trusted_origins={f"127.0.0.1:{js_site.port}"}) as crawler:
        with pytest.raises(ProviderResponseError, match="no text"):  # the shell alone has no text
            await crawler.fetch(f"{js_site.base_url}/app", deadline=time.monotonic() + 20, render="never")

        page = await crawler.fetch(f"{js_site.base_url}/app", deadline=time.monotonic() + 30, render="browser")

    assert page.backend == "playwright"
    for sentence in SENTENCES:
        assert sentence in page.text
    assert page.title == "Written by JavaScript"  # trafilatura's pick: the rendered h1
    assert len(js_site.requests_for("/static/app.js")) == 1  # served through the guarded downloader


@pytest.mark.slow
async def test_auto_mode_falls_back_to_the_browser_for_a_script_shell(
    js_site: ReplayServer, make_settings: Callable[..., Settings], client: httpx.AsyncClient
) -> None:
    async with Crawler(make_settings(), client, trusted_origins={f"127.0.0.1:{js_site.port}"}) as crawler:
        page = await crawler.fetch(f"{js_site.base_url}/app", deadline=time.monotonic() + 30)
    assert page.backend == "playwright" and SENTENCES[2] in page.text


async def test_browser_refuses_private_targets_too(
    js_site: ReplayServer, make_settings: Callable[..., Settings], client: httpx.AsyncClient
) -> None:
    async with Crawler(make_settings(), client) as crawler:
        with pytest.raises(FetchRefusedError):
            await crawler.fetch(f"{js_site.base_url}/app", deadline=time.monotonic() + 20, render="browser")
    assert js_site.requests == []
