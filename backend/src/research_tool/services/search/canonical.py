"""URL canonicalization for dedup (initial version; the providers work extends it)."""

from __future__ import annotations

from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

TRACKING_PREFIXES = ("utm_", "fbclid", "gclid", "mc_", "ref_src")


def canonical_url(url: str) -> str:
    """Lower-case scheme and host, drop default ports, fragments (except file:// document ids) and tracking parameters."""
    parts = urlsplit(url.strip())
    scheme = parts.scheme.lower()
    if scheme == "file":
        return url.strip()
    host = (parts.hostname or "").lower()
    port = parts.port
    netloc = host if port is None or (scheme, port) in {("http", 80), ("https", 443)} else f"{host}:{port}"
    query = urlencode([(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True)
                       if not k.lower().startswith(TRACKING_PREFIXES)])
    path = parts.path or "/"
    return urlunsplit((scheme, netloc, path, query, ""))
