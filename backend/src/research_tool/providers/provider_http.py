"""How providers talk HTTP: rate-limited sends on the shared client, status codes turned into the
typed errors of core.errors, server pauses (Retry-After, X-RateLimit-Reset) applied to the
provider's process-wide limiter, and safe XML/JSON decoding."""

from __future__ import annotations

import email.utils
import json
import socket
import time
from typing import Any

import httpx
from lxml import etree

from research_tool.core.errors import (
    AccessDeniedError,
    HostUnresolvedError,
    ProviderResponseError,
    ProviderServerError,
    ProviderTimeoutError,
    RateLimitError,
)
from research_tool.core.untrusted_text import clean_text
from research_tool.providers.base import SearchProvider
from research_tool.providers.resilience.rate_limiter import provider_limiter

# Statuses that mean "you may not have this": auth, payment, Tavily's plan limits (432, 433).
ACCESS_DENIED_STATUSES = frozenset({401, 402, 403, 432, 433})
# Pause applied to a provider that rate-limited us without saying for how long.
DEFAULT_RATE_LIMIT_PAUSE_S = 2.0

_XML_PARSER = etree.XMLParser(resolve_entities=False, no_network=True, huge_tree=False, load_dtd=False)


def retry_after_seconds(headers: httpx.Headers) -> float | None:
    """Seconds to wait from `Retry-After` (seconds or HTTP date) or `X-RateLimit-Reset` (seconds or epoch)."""
    value = headers.get("retry-after")
    if value:
        value = value.strip()
        try:
            return max(0.0, float(value))
        except ValueError:
            parsed = email.utils.parsedate_to_datetime(value) if value else None
            if parsed is not None:
                return max(0.0, parsed.timestamp() - time.time())
    reset = headers.get("x-ratelimit-reset") or headers.get("ratelimit-reset")
    if reset:
        # Brave sends one value per window ("1, 1419"): the first is the short window that tripped.
        first = reset.split(",")[0].strip()
        try:
            seconds = float(first)
        except ValueError:
            return None
        if seconds > 1e9:  # an epoch timestamp
            seconds -= time.time()
        return max(0.0, seconds)
    return None


def rate_limited(
    provider: SearchProvider, message: str, *, retry_after: float | None = None, url: str | None = None
) -> RateLimitError:
    """Pause the provider's limiter for everyone and return the error to raise."""
    pause = (
        retry_after if retry_after is not None else max(DEFAULT_RATE_LIMIT_PAUSE_S, 2.0 / provider.requests_per_second)
    )
    provider_limiter(provider).pause(pause, reason="server_rate_limit")
    return RateLimitError(provider.name, message, retry_after=retry_after, url=url)


def error_message(response: httpx.Response) -> str:
    """The provider's own words for an error ({"error": ...}, {"message": ...}, {"detail": {"error": ...}}), without
    control characters: they are stored with the access failure (core/untrusted_text.py)."""
    return clean_text(_provider_words(response))


def _provider_words(response: httpx.Response) -> str:
    try:
        body = response.json()
    except (ValueError, UnicodeDecodeError):
        return f"HTTP {response.status_code}: {response.text[:300].strip()}"
    if isinstance(body, dict):
        for key in ("error", "message", "detail", "info"):
            value = body.get(key)
            if isinstance(value, dict):
                inner = value.get("info") or value.get("error") or value.get("message") or value.get("detail")
                if inner:
                    return f"HTTP {response.status_code}: {inner}"
            elif value:
                return f"HTTP {response.status_code}: {value}"
    return f"HTTP {response.status_code}: {json.dumps(body)[:300]}"


def raise_for_status(provider: SearchProvider, response: httpx.Response) -> None:
    status = response.status_code
    if status < 400:
        return
    url = str(response.request.url) if response.request else None
    message = error_message(response)
    if status == 429:
        raise rate_limited(provider, message, retry_after=retry_after_seconds(response.headers), url=url)
    if status in ACCESS_DENIED_STATUSES:
        raise AccessDeniedError(provider.name, message, url=url)
    if status >= 500:
        raise ProviderServerError(provider.name, message, status=status, url=url)
    raise ProviderResponseError(provider.name, message, url=url)


def host_unresolved(exc: BaseException) -> bool:
    """Whether a connection failed because the host name could not be resolved (socket.gaierror anywhere in
    the chain of causes: httpx wraps the transport's error, which wraps the resolver's)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, socket.gaierror):
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False


async def send(
    provider: SearchProvider,
    method: str,
    url: str,
    *,
    params: dict[str, Any] | None = None,
    json_body: dict[str, Any] | None = None,
    headers: dict[str, str] | None = None,
    check: bool = True,
) -> httpx.Response:
    """One request through the provider endpoint's gate (in-flight bound and rate limit), so that it reaches
    the shared client's pool only when it can be sent. Base URLs are operator-set, so redirects are followed."""
    try:
        async with provider_limiter(provider).slot():
            response = await provider.client.request(
                method, url, params=params, json=json_body, headers=headers, follow_redirects=True
            )
    except httpx.TimeoutException as exc:
        raise ProviderTimeoutError(provider.name, f"timed out ({type(exc).__name__})", url=url) from exc
    except httpx.HTTPError as exc:
        if host_unresolved(exc):
            raise HostUnresolvedError(provider.name, f"host not found: {exc}", url=url) from exc
        raise ProviderServerError(
            provider.name, f"connection failed: {type(exc).__name__}: {exc}", status=0, url=url
        ) from exc
    if check:
        raise_for_status(provider, response)
    return response


def json_body(provider: SearchProvider, response: httpx.Response) -> Any:
    try:
        return response.json()
    except (ValueError, UnicodeDecodeError) as exc:
        raise ProviderResponseError(
            provider.name, f"response is not JSON: {response.text[:200]!r}", url=str(response.request.url)
        ) from exc


def xml_root(provider: SearchProvider, content: bytes, *, url: str | None = None) -> etree._Element:
    """Parse XML without entity expansion, DTD loading or network access."""
    try:
        return etree.fromstring(content, parser=_XML_PARSER)
    except etree.XMLSyntaxError as exc:
        raise ProviderResponseError(provider.name, f"response is not valid XML: {exc}", url=url) from exc
