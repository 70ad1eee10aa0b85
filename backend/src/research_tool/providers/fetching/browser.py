"""Playwright backend of the crawler: renders pages whose text is written by JavaScript, in the system
Chromium (`/usr/bin/chromium`; never `playwright install`).

The browser never touches the network itself. Every request the page makes is intercepted and
answered by the crawler's own guarded downloader (SSRF checks after DNS and on every redirect, size
and type limits), or aborted; images, fonts, media and styles are aborted outright. Service workers are
blocked (they would bypass interception), and the browser's own proxy points at a closed port so
that anything interception does not see (WebSockets, background requests) goes nowhere.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from research_tool.core.errors import (
    FetchRefusedError,
    ProviderError,
    ProviderResponseError,
    ProviderTimeoutError,
    ProviderUnavailableError,
)
from research_tool.core.logging import get_logger

log = get_logger(__name__)

SYSTEM_CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
)
# Resource types the page may load (through the guarded downloader); the rest are aborted.
ALLOWED_RESOURCE_TYPES = frozenset({"document", "script", "xhr", "fetch"})
# Where the browser's own network would go if anything escaped interception: a closed port.
DEAD_END_PROXY = {"server": "http://127.0.0.1:9", "bypass": "<-loopback>"}
# Where Chromium shows its own error pages ("This page has been blocked by Chromium", ERR_...).
CHROMIUM_ERROR_PAGE_SCHEME = "chrome-error:"


@dataclass(frozen=True)
class Subresource:
    status: int
    content_type: str
    body: bytes


# The crawler's guarded downloader: (url, is_main_document) -> response, or a ProviderError.
Downloader = Callable[[str, bool], Awaitable[Subresource]]


def find_chromium() -> str | None:
    """The system Chromium, if any: RESEARCH_CHROMIUM_PATH, /usr/bin/chromium, or chromium on PATH."""
    for candidate in (os.environ.get("RESEARCH_CHROMIUM_PATH"), SYSTEM_CHROMIUM):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return shutil.which("chromium") or shutil.which("chromium-browser")


def browser_unavailable_reason() -> str | None:
    try:
        import playwright.async_api  # noqa: F401
    except ImportError:
        return "the 'browser' extra is not installed (pip install 'research-tool[browser]')"
    if find_chromium() is None:
        return "no system Chromium (apt-get install -y chromium)"
    return None


class BrowserRenderer:
    """One headless Chromium per renderer, launched on first use; a fresh context per page."""

    def __init__(self, executable_path: str | None = None) -> None:
        self.executable_path = executable_path or find_chromium()
        self._playwright: Any = None
        self._browser: Any = None
        self._lock = asyncio.Lock()

    async def _ensure_browser(self) -> Any:
        async with self._lock:
            if self._browser is not None and self._browser.is_connected():
                return self._browser
            reason = browser_unavailable_reason() if self.executable_path is None else None
            if reason or self.executable_path is None:
                raise ProviderUnavailableError("crawler", f"browser rendering unavailable: {reason}")
            from playwright.async_api import async_playwright

            self._playwright = await async_playwright().start()
            self._browser = await self._playwright.chromium.launch(
                executable_path=self.executable_path,
                headless=True,
                args=list(CHROMIUM_FLAGS),
                proxy=DEAD_END_PROXY,
            )
            log.info("browser_started", executable=self.executable_path)
            return self._browser

    async def render(self, url: str, download: Downloader, *, timeout_s: float) -> tuple[str, str]:
        """(final URL, rendered HTML) of `url`, every request served by `download`."""
        from playwright.async_api import Error as PlaywrightError
        from playwright.async_api import Route

        browser = await self._ensure_browser()
        context = await browser.new_context(service_workers="block", java_script_enabled=True)
        try:
            page = await context.new_page()

            async def handle(route: Route) -> None:
                request = route.request
                is_main = request.is_navigation_request() and request.frame == page.main_frame
                if request.method != "GET" or request.resource_type not in ALLOWED_RESOURCE_TYPES:
                    await route.abort("blockedbyclient")
                    return
                try:
                    response = await download(request.url, is_main)
                except ProviderError as exc:
                    log.info("browser_request_refused", url=request.url, error_type=exc.error_type)
                    if is_main:
                        main_error.append(exc)
                    await route.abort("blockedbyclient")
                    return
                except Exception as exc:  # an unanswered route stalls the page until the deadline
                    log.warning("browser_request_failed", url=request.url, error=type(exc).__name__)
                    if is_main:
                        main_error.append(ProviderResponseError("crawler", f"request failed: {exc}", url=request.url))
                    await route.abort("failed")
                    return
                await route.fulfill(
                    status=response.status, headers={"content-type": response.content_type}, body=response.body
                )

            main_error: list[ProviderError] = []
            await page.route("**/*", handle)
            try:
                await page.goto(url, wait_until="load", timeout=max(timeout_s, 0.1) * 1000)
                with contextlib.suppress(PlaywrightError):  # a page that keeps polling: take what is rendered
                    await page.wait_for_load_state("networkidle", timeout=min(2000, max(timeout_s, 0.1) * 500))
            except PlaywrightError as exc:
                if main_error:
                    raise main_error[0] from exc
                if "Timeout" in type(exc).__name__:
                    raise ProviderTimeoutError("crawler", "browser navigation timed out", url=url) from exc
                raise ProviderResponseError("crawler", f"browser navigation failed: {exc.message}", url=url) from exc
            if main_error:
                raise main_error[0]
            if page.url.startswith(CHROMIUM_ERROR_PAGE_SCHEME):
                # The page navigated somewhere the handler refused (a form POST, a blocked frame target):
                # what is on screen is Chromium's "This page has been blocked" page, not the document.
                raise FetchRefusedError("crawler", "the browser blocked a navigation of this page", url=url)
            return page.url, await page.content()
        finally:
            await context.close()

    async def aclose(self) -> None:
        async with self._lock:
            if self._browser is not None:
                await self._browser.close()
                self._browser = None
            if self._playwright is not None:
                await self._playwright.stop()
                self._playwright = None
