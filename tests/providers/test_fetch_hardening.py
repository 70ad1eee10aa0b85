"""Crawler and URL guard hardening (issue 10 item 7): a `http:\\host` redirect is a fetch error (never an
httpx.InvalidURL escaping, never a browser stall), Chromium's own "blocked" page is never a document, and
the 6to4, NAT64 and Teredo forms of a forbidden IPv4 address are refused."""

from __future__ import annotations

import ipaddress
import time
from collections.abc import Callable

import httpx
import pytest

from research_tool.core.errors import FetchRefusedError, ProviderError
from research_tool.core.settings import Settings
from research_tool.providers.fetching.browser import browser_unavailable_reason
from research_tool.providers.fetching.crawler import Crawler
from research_tool.providers.fetching.url_guard import UrlGuard, is_public_address

from .replay import ReplayServer, Reply

HTML = "text/html; charset=utf-8"
TEXT = "<html><head><title>Start</title></head><body><p>" + "A paragraph of ordinary text. " * 20 + "</p>"
NO_BROWSER = browser_unavailable_reason()


@pytest.mark.parametrize(
    "address",
    [
        "2002:7f00:1::",  # 6to4 of 127.0.0.1
        "2002:a9fe:a9fe::1",  # 6to4 of 169.254.169.254
        "2002:c0a8:0101::",  # 6to4 of 192.168.1.1
        "64:ff9b::7f00:1",  # NAT64 of 127.0.0.1
        "64:ff9b::a9fe:a9fe",  # NAT64 of 169.254.169.254
        "64:ff9b:1::a00:1",  # local-use NAT64 of 10.0.0.1
        "2001:0:4136:e378:8000:63bf:80ff:fffe",  # Teredo, client 127.0.0.1
        "::ffff:127.0.0.1",  # IPv4-mapped
        "::127.0.0.1",  # IPv4-compatible
    ],
)
async def test_embedded_forbidden_ipv4_is_refused(address: str) -> None:
    assert not is_public_address(ipaddress.ip_address(address))
    with pytest.raises(FetchRefusedError):
        await UrlGuard().check(f"http://[{address}]/")

    async def resolves_to_it(host: str, port: int) -> list[str]:
        return [address]

    with pytest.raises(FetchRefusedError):
        await UrlGuard(resolver=resolves_to_it).check("http://innocent.example/")


def test_public_addresses_stay_allowed() -> None:
    for address in ("93.184.216.34", "2606:2800:220:1:248:1893:25c8:1946", "2002:5db8:d822::1"):
        assert is_public_address(ipaddress.ip_address(address)), address


@pytest.fixture
def backslash_site(replay: ReplayServer) -> ReplayServer:
    replay.route("/start", Reply(302, headers={"Location": "http:\\\\127.0.0.1\\x"}))
    replay.route("/x", Reply(200, body=TEXT, content_type=HTML))
    return replay


async def test_backslash_redirect_is_a_fetch_error(
    backslash_site: ReplayServer, make_settings: Callable[..., Settings], client: httpx.AsyncClient
) -> None:
    async with Crawler(make_settings(), client, allow_private_hosts=True) as crawler:
        with pytest.raises(ProviderError) as refused:
            await crawler.fetch(f"{backslash_site.base_url}/start", deadline=time.monotonic() + 10, render="never")
    assert isinstance(refused.value, FetchRefusedError)
    assert "redirect" in refused.value.message
    assert backslash_site.requests_for("/x") == []


@pytest.mark.slow
@pytest.mark.skipif(NO_BROWSER is not None, reason=f"no browser: {NO_BROWSER}")
async def test_backslash_redirect_in_the_browser_fails_fast(
    backslash_site: ReplayServer, make_settings: Callable[..., Settings], client: httpx.AsyncClient
) -> None:
    started = time.monotonic()
    async with Crawler(make_settings(), client, allow_private_hosts=True) as crawler:
        with pytest.raises(FetchRefusedError):
            await crawler.fetch(f"{backslash_site.base_url}/start", deadline=time.monotonic() + 40, render="browser")
    assert time.monotonic() - started < 20  # the deadline was 40 s: the page did not wait it out


@pytest.mark.slow
@pytest.mark.skipif(NO_BROWSER is not None, reason=f"no browser: {NO_BROWSER}")
async def test_chromium_blocked_page_is_never_a_document(
    replay: ReplayServer, make_settings: Callable[..., Settings], client: httpx.AsyncClient
) -> None:
    # The page posts a form on load: the browser aborts the POST navigation and shows its own error page.
    page = TEXT + '<form method="post" action="/elsewhere"></form><script>document.forms[0].submit()</script>'
    replay.route("/post", Reply(200, body=page + "</body></html>", content_type=HTML))
    async with Crawler(make_settings(), client, allow_private_hosts=True) as crawler:
        with pytest.raises(FetchRefusedError, match="blocked a navigation"):
            await crawler.fetch(f"{replay.base_url}/post", deadline=time.monotonic() + 30, render="browser")
