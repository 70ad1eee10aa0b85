"""Fetches result pages for their full text (DESIGN §4).

httpx + trafilatura by default; a Playwright backend (system Chromium) for pages that need a browser,
chosen per request (`render="browser"`) or by the fallback rule of `render="auto"`: the plain fetch
found almost no text (< MIN_TEXT_CHARS) in a page that runs scripts.

Safety (URLs from search results are untrusted): http(s) only; the host must resolve to public
addresses only, checked after DNS and again on every redirect, and the connection is pinned to the
checked address; bodies over 5 MB and non-text content types are refused. 1 request/s per host
(RESEARCH_CRAWLER_RPS), shared process-wide. CAPTCHA and paywall pages raise AccessDeniedError.
Fetched text is data, never instructions.
"""

from __future__ import annotations

import asyncio
import io
import time
from collections.abc import Collection
from dataclasses import dataclass
from typing import Literal
from urllib.parse import urljoin

import httpx
import trafilatura
from trafilatura.settings import Document as TrafilaturaDocument

from research_tool.core import telemetry
from research_tool.core.errors import (
    AccessDeniedError,
    FetchRefusedError,
    ProviderError,
    ProviderResponseError,
    ProviderServerError,
    ProviderTimeoutError,
    ProviderUnavailableError,
    RateLimitError,
    SessionDeadlineError,
)
from research_tool.core.logging import get_logger
from research_tool.core.settings import Settings
from research_tool.core.untrusted_text import clean_text
from research_tool.providers.fetching.browser import BrowserRenderer, Subresource, browser_unavailable_reason
from research_tool.providers.fetching.obstacles import is_captcha_page, is_paywalled
from research_tool.providers.fetching.url_guard import Resolver, UrlGuard
from research_tool.providers.provider_http import retry_after_seconds
from research_tool.providers.resilience.rate_limiter import get_rate_limiter
from research_tool.providers.resilience.retry import RetryPolicy, deadline_retrying

log = get_logger(__name__)

RenderMode = Literal["auto", "never", "browser"]

MAX_BODY_BYTES = 5 * 1024 * 1024
MAX_REDIRECTS = 5
MIN_TEXT_CHARS = 200
DEFAULT_CRAWLER_RPS = 1.0
HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
TEXT_TYPES = frozenset({"text/plain", "text/markdown", "text/xml", "application/xml"})
PDF_TYPES = frozenset({"application/pdf"})
PAGE_TYPES = HTML_TYPES | TEXT_TYPES | PDF_TYPES
# What a rendered page may additionally load through the guarded downloader.
SCRIPT_TYPES = frozenset(
    {"application/javascript", "text/javascript", "application/x-javascript", "application/json", "text/css"}
)
RETRY_POLICY = RetryPolicy(max_attempts=3, initial_wait_s=0.5, max_wait_s=4.0)


@dataclass(frozen=True)
class FetchedPage:
    url: str  # as requested
    final_url: str  # after redirects
    title: str | None
    text: str  # main text, extracted
    content_type: str
    backend: str  # "httpx" | "playwright"

    def __post_init__(self) -> None:
        """A fetched page's text enters here: control characters (NUL...) removed (core/untrusted_text.py)."""
        object.__setattr__(self, "text", clean_text(self.text))
        if self.title is not None:
            object.__setattr__(self, "title", clean_text(self.title))


@dataclass(frozen=True)
class RawResponse:
    url: str
    final_url: str
    status: int
    content_type: str  # media type only, lower case
    charset: str | None
    body: bytes

    def html(self) -> str:
        return self.body.decode(self.charset or "utf-8", errors="replace")


def _media_type(header: str | None) -> tuple[str, str | None]:
    if not header:
        return "", None
    parts = [p.strip() for p in header.split(";")]
    charset = None
    for part in parts[1:]:
        if part.lower().startswith("charset="):
            charset = part.split("=", 1)[1].strip("\"' ") or None
    return parts[0].lower(), charset


def _sniff(body: bytes) -> str:
    head = body[:512].lstrip().lower()
    if head.startswith(b"%pdf"):
        return "application/pdf"
    if head.startswith((b"<!doctype html", b"<html", b"<head", b"<body", b"<div", b"<p")):
        return "text/html"
    return ""


def _extract_html(html: str, url: str) -> tuple[str | None, str]:
    extracted = trafilatura.bare_extraction(html, url=url, with_metadata=True, include_comments=False)
    document = extracted if isinstance(extracted, TrafilaturaDocument) else None  # a dict only with as_dict=True
    text = (document.text or "").strip() if document is not None else ""
    title = document.title if document is not None else None
    if not text:
        text = (trafilatura.html2txt(html) or "").strip()
    return title, text


def _extract_pdf(body: bytes) -> tuple[str | None, str]:
    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    try:
        reader = PdfReader(io.BytesIO(body))
        text = "\n".join((page.extract_text() or "") for page in reader.pages).strip()
        title = reader.metadata.title if reader.metadata else None
    except (PdfReadError, ValueError, KeyError) as exc:
        raise ProviderResponseError("crawler", f"unreadable PDF: {exc}") from exc
    return (str(title) if title else None), text


def _host_of(url: str) -> str:
    try:
        return httpx.URL(url).host or ""
    except (httpx.InvalidURL, UnicodeError):
        return ""


def _status_in(message: str) -> int | None:
    """The HTTP status an obstacle's message names (`HTTP 403`, `HTTP 429: ...`), if any."""
    _, found, rest = message.partition("HTTP ")
    digits = rest[:3]
    return int(digits) if found and digits.isdigit() else None


class Crawler:
    name = "crawler"

    def __init__(
        self,
        settings: Settings,
        client: httpx.AsyncClient,
        *,
        allow_private_hosts: bool = False,
        trusted_origins: Collection[str] = (),
        resolver: Resolver | None = None,
        browser: BrowserRenderer | None = None,
        max_bytes: int = MAX_BODY_BYTES,
    ) -> None:
        """`allow_private_hosts` is for tests that fetch from 127.0.0.1; by default private hosts are refused.
        `trusted_origins` ("host:port") are private origins an operator trusts. `browser` defaults to a
        renderer on the system Chromium, launched only when a page needs it."""
        self.settings = settings
        self.client = client
        self.guard = UrlGuard(
            resolver=resolver, allow_private_hosts=allow_private_hosts, trusted_origins=trusted_origins
        )
        self.max_bytes = max_bytes
        self._browser = browser
        self._owns_browser = browser is None

    @property
    def requests_per_second(self) -> float:
        return self.settings.provider_rps(self.name, DEFAULT_CRAWLER_RPS)

    def browser_unavailable_reason(self) -> str | None:
        return None if self._browser is not None else browser_unavailable_reason()

    async def aclose(self) -> None:
        """Close the browser if this crawler started one (the httpx client belongs to the caller)."""
        if self._browser is not None and self._owns_browser:
            await self._browser.aclose()
            self._browser = None

    async def __aenter__(self) -> Crawler:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    # --- public ---------------------------------------------------------------------------------

    async def fetch(self, url: str, *, deadline: float, render: RenderMode = "auto") -> FetchedPage:
        """Fetch and extract one page before `deadline` (time.monotonic()); raises ProviderError subclasses.

        Timeouts, 5xx and 429 are retried (at most 3 attempts, never past the deadline); refusals,
        access denials (401/402/403, CAPTCHA, paywall) and other 4xx are not. With tracing on, a `page.fetch`
        span: host, status, bytes, the obstacle that stopped it (the URL itself only with RESEARCH_TRACE_CONTENT).
        """
        if not telemetry.enabled():
            return await self._fetch(url, deadline, render)
        attributes = {"server.address": _host_of(url), "http.request.method": "GET"}
        if telemetry.content_enabled():
            attributes["url.full"] = url
        with telemetry.span("page.fetch", attributes, kind="client") as span:
            try:
                page = await self._fetch(url, deadline, render)
            except ProviderError as exc:
                span.set("research.fetch.obstacle", exc.error_type)
                span.set("http.response.status_code", getattr(exc, "status", None) or _status_in(exc.message))
                span.fail(exc.message[:300])
                raise
            span.set_many({"research.fetch.backend": page.backend, "research.fetch.text_chars": len(page.text)})
            return page

    async def _fetch(self, url: str, deadline: float, render: RenderMode) -> FetchedPage:
        page: FetchedPage | None = None
        async for attempt in deadline_retrying(deadline, RETRY_POLICY):
            with attempt:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise SessionDeadlineError(self.name, "session deadline reached", url=url)
                try:
                    async with asyncio.timeout(remaining):
                        page = await self._fetch_once(url, render, deadline)
                except TimeoutError:
                    raise SessionDeadlineError(self.name, "session deadline reached", url=url) from None
        assert page is not None
        return page

    # --- one attempt ----------------------------------------------------------------------------

    async def _fetch_once(self, url: str, render: RenderMode, deadline: float) -> FetchedPage:
        if render == "browser":
            return await self._render(url, deadline)
        raw = await self.download(url, accept=PAGE_TYPES, rate_limited=True)
        telemetry.current().set_many({"http.response.status_code": raw.status, "research.fetch.bytes": len(raw.body)})
        page = await self._page_from(raw, backend="httpx")
        if render == "auto" and self._needs_browser(raw, page.text):
            log.info("crawler_browser_fallback", url=url, text_chars=len(page.text))
            return await self._render(url, deadline)
        if not page.text:
            raise ProviderResponseError(self.name, "no text could be extracted", url=url)
        return page

    def _needs_browser(self, raw: RawResponse, text: str) -> bool:
        """The fallback rule: an HTML page that runs scripts but gave (almost) no text, and a browser exists."""
        return (
            len(text) < MIN_TEXT_CHARS
            and raw.content_type in HTML_TYPES
            and b"<script" in raw.body.lower()
            and self.browser_unavailable_reason() is None
        )

    async def _page_from(self, raw: RawResponse, *, backend: str) -> FetchedPage:
        if raw.content_type in PDF_TYPES:
            title, text = await asyncio.to_thread(_extract_pdf, raw.body)
        elif raw.content_type in HTML_TYPES:
            html = raw.html()
            if is_captcha_page(html):
                raise AccessDeniedError(self.name, "CAPTCHA / bot-check page", url=raw.url)
            title, text = await asyncio.to_thread(_extract_html, html, raw.final_url)
            if is_paywalled(html, text):
                raise AccessDeniedError(self.name, "paywall: only a teaser is available", url=raw.url)
        else:
            title, text = None, raw.html().strip()
        return FetchedPage(
            url=raw.url,
            final_url=raw.final_url,
            title=title,
            text=text,
            content_type=raw.content_type,
            backend=backend,
        )

    async def _render(self, url: str, deadline: float) -> FetchedPage:
        if self._browser is None:
            reason = browser_unavailable_reason()
            if reason:
                raise ProviderUnavailableError(self.name, f"browser rendering unavailable: {reason}", url=url)
            self._browser = BrowserRenderer()

        async def download(request_url: str, is_main: bool) -> Subresource:
            accept = PAGE_TYPES if is_main else PAGE_TYPES | SCRIPT_TYPES
            raw = await self.download(request_url, accept=accept, rate_limited=is_main)
            return Subresource(status=raw.status, content_type=raw.content_type or "text/plain", body=raw.body)

        final_url, html = await self._browser.render(url, download, timeout_s=deadline - time.monotonic())
        if is_captcha_page(html):
            raise AccessDeniedError(self.name, "CAPTCHA / bot-check page", url=url)
        title, text = await asyncio.to_thread(_extract_html, html, final_url)
        if is_paywalled(html, text):
            raise AccessDeniedError(self.name, "paywall: only a teaser is available", url=url)
        if not text:
            raise ProviderResponseError(self.name, "no text after rendering", url=url)
        return FetchedPage(
            url=url, final_url=final_url, title=title, text=text, content_type="text/html", backend="playwright"
        )

    # --- guarded download -----------------------------------------------------------------------

    async def download(
        self, url: str, *, accept: frozenset[str] = PAGE_TYPES, rate_limited: bool = True
    ) -> RawResponse:
        """GET `url` following redirects by hand; every hop is checked by the URL guard before any connection."""
        current = url
        for _hop in range(MAX_REDIRECTS + 1):
            target = await self.guard.check(current)
            if rate_limited:
                await get_rate_limiter(f"{self.name}:{target.host}", self.requests_per_second).acquire()
            try:
                request = self.client.build_request(
                    "GET",
                    target.pinned_url(),
                    headers={
                        "Host": target.url.netloc.decode("ascii"),
                        "Accept": "text/html,application/xhtml+xml,text/plain;q=0.9,application/pdf;q=0.8,*/*;q=0.5",
                    },
                    extensions={"sni_hostname": target.host},
                )
            except (httpx.InvalidURL, UnicodeError) as exc:
                raise FetchRefusedError(self.name, f"invalid URL: {exc}", url=current) from exc
            try:
                response = await self.client.send(request, stream=True, follow_redirects=False)
            except httpx.TimeoutException as exc:
                raise ProviderTimeoutError(self.name, f"timed out ({type(exc).__name__})", url=current) from exc
            except httpx.InvalidURL as exc:  # httpx parses a redirect's Location even when not following it
                raise FetchRefusedError(self.name, f"malformed redirect Location: {exc}", url=current) from exc
            except httpx.HTTPError as exc:
                raise ProviderServerError(
                    self.name, f"connection failed: {type(exc).__name__}", status=0, url=current
                ) from exc
            try:
                if response.is_redirect:
                    location = response.headers.get("location")
                    if not location:
                        raise ProviderResponseError(
                            self.name, f"HTTP {response.status_code} without Location", url=current
                        )
                    current = self._redirect_target(target.url, location, current)
                    continue
                return await self._read(url, current, response, accept)
            finally:
                await response.aclose()
        raise FetchRefusedError(self.name, f"more than {MAX_REDIRECTS} redirects", url=url)

    def _redirect_target(self, base: httpx.URL, location: str, current: str) -> str:
        """Where a redirect points, or FetchRefusedError. A Location with a backslash (`http:\\\\host`, which
        browsers read as `http://host`) or a control character is malformed, not something to repair."""
        if "\\" in location or any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in location):
            raise FetchRefusedError(self.name, f"malformed redirect Location {location[:100]!r}", url=current)
        joined = urljoin(str(base), location)
        try:
            httpx.URL(joined)
        except httpx.InvalidURL as exc:
            raise FetchRefusedError(self.name, f"invalid redirect Location {location[:100]!r}", url=current) from exc
        return joined

    async def _read(self, url: str, final_url: str, response: httpx.Response, accept: frozenset[str]) -> RawResponse:
        status = response.status_code
        if status >= 400:
            body = await self._read_body(response, final_url, limit=256 * 1024)
            self._raise_for_status(status, body, response.headers, final_url)
        declared = response.headers.get("content-length")
        if declared and declared.isdigit() and int(declared) > self.max_bytes:
            raise FetchRefusedError(self.name, f"body of {declared} bytes exceeds {self.max_bytes}", url=final_url)
        media_type, charset = _media_type(response.headers.get("content-type"))
        if media_type and media_type not in accept:
            raise FetchRefusedError(self.name, f"content type '{media_type}' is not text", url=final_url)
        body = await self._read_body(response, final_url, limit=self.max_bytes)
        media_type = media_type or _sniff(body)
        if media_type not in accept:
            raise FetchRefusedError(self.name, "content type unknown and not recognizably text", url=final_url)
        return RawResponse(
            url=url, final_url=final_url, status=status, content_type=media_type, charset=charset, body=body
        )

    async def _read_body(self, response: httpx.Response, url: str, *, limit: int) -> bytes:
        chunks: list[bytes] = []
        size = 0
        async for chunk in response.aiter_bytes():
            size += len(chunk)
            if size > limit:
                if limit == self.max_bytes:
                    raise FetchRefusedError(self.name, f"body exceeds {self.max_bytes} bytes", url=url)
                break
            chunks.append(chunk)
        return b"".join(chunks)

    def _raise_for_status(self, status: int, body: bytes, headers: httpx.Headers, url: str) -> None:
        text = body.decode("utf-8", errors="replace")
        if status in (403, 429, 503) and is_captcha_page(text):
            raise AccessDeniedError(self.name, f"HTTP {status}: CAPTCHA / bot-check page", url=url)
        if status == 429:
            pause = retry_after_seconds(headers)
            host = httpx.URL(url).host
            get_rate_limiter(f"{self.name}:{host}", self.requests_per_second).pause(pause if pause is not None else 5.0)
            raise RateLimitError(self.name, "HTTP 429", retry_after=pause, url=url)
        if status in (401, 402, 403):
            raise AccessDeniedError(self.name, f"HTTP {status}", url=url)
        if status >= 500:
            raise ProviderServerError(self.name, f"HTTP {status}", status=status, url=url)
        raise ProviderResponseError(self.name, f"HTTP {status}", url=url)
