"""Which source a result is: canonical URLs, DOIs, arXiv ids, and the grouping of results that are one source.

URLs are normalized with courlan (scheme/host case, default ports, tracking parameters, sorted
query) and lose their fragment; non-http(s) URLs (the local provider's `file://...#id`) are kept
as they are, because their fragment names a document. Two results are the same source when they
share a DOI, an arXiv id or a canonical URL, directly or through a third result (a Semantic Scholar
record with both a DOI and an arXiv id joins the arXiv and the journal copies of one paper). The
graph's collect step files every result under the canonical URL of the first sighting of its group.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from urllib.parse import unquote, urlsplit, urlunsplit

import courlan

_DOI_CHAR = r"[^\s\"'<>]"
# Wiley's 1990s DOIs embed a SICI whose contribution segment sits in angle brackets:
# 10.1002/(SICI)1097-4636(199706)35:4<419::AID-JBM1>3.0.CO;2-L. Such a segment (it always holds "::")
# is part of the DOI; any other "<" (an HTML tag after a DOI in a page) ends it.
_SICI_SEGMENT = r"<[^\s\"'<>]*::[^\s\"'<>]*>"
_DOI_PATTERN = re.compile(rf"\b(10\.\d{{4,9}}/(?:{_SICI_SEGMENT}|{_DOI_CHAR})+)", re.IGNORECASE)
_PERCENT_ESCAPE = re.compile(r"%[0-9a-f]{2}", re.IGNORECASE)
_DOI_PREFIXES = ("https://doi.org/", "http://doi.org/", "https://dx.doi.org/", "http://dx.doi.org/", "doi:")
# arXiv's own DOIs (DataCite): 10.48550/arXiv.2202.12139
_ARXIV_DOI = re.compile(r"^10\.48550/arxiv\.(.+)$", re.IGNORECASE)
_ARXIV_PREFIX = re.compile(r"^arxiv:\s*", re.IGNORECASE)
_ARXIV_NEW_ID = re.compile(r"(\d{4}\.\d{4,5})(v\d+)?", re.IGNORECASE)
_ARXIV_OLD_ID = re.compile(r"([a-z][a-z\-]*(?:\.[a-z]{2})?/\d{7})(v\d+)?", re.IGNORECASE)
_ARXIV_URL = re.compile(r"^https?://(?:www\.|export\.)?arxiv\.org/(?:abs|pdf)/(.+?)(?:\.pdf)?/?$", re.IGNORECASE)


def canonical_url(url: str) -> str:
    """Canonical form of an http(s) URL; other schemes come back unchanged."""
    url = url.strip()
    scheme = urlsplit(url).scheme.lower()
    if scheme not in ("http", "https"):
        return url
    try:
        normalized = courlan.normalize_url(url, strict=False)
    except ValueError:
        normalized = url
    parts = urlsplit(normalized)
    path = parts.path or "/"
    return urlunsplit((parts.scheme.lower(), parts.netloc.lower(), path, parts.query, ""))


def normalize_doi(raw: str | None) -> str | None:
    """`https://doi.org/10.1038/X`, `doi:10.1038/x` and `10.1038/X` all give `10.1038/x`.

    Percent-escapes are decoded (a doi.org link to a SICI DOI writes its `<` as `%3C`); a closing
    parenthesis at the end is dropped only when it has no opening partner in the DOI (prose around it).
    """
    if not raw:
        return None
    text = raw.strip()
    lowered = text.lower()
    for prefix in _DOI_PREFIXES:
        if lowered.startswith(prefix):
            text = text[len(prefix) :]
            break
    if _PERCENT_ESCAPE.search(text):
        text = unquote(text)
    match = _DOI_PATTERN.search(text)
    if not match:
        return None
    return _strip_trailing_punctuation(match.group(1)).lower()


def _strip_trailing_punctuation(doi: str) -> str:
    while True:
        trimmed = doi.rstrip(".,;")
        if trimmed.endswith(")") and trimmed.count("(") < trimmed.count(")"):
            trimmed = trimmed[:-1]
        if trimmed == doi:
            return doi
        doi = trimmed


def find_doi(text: str) -> str | None:
    """The first DOI mentioned anywhere in `text` (a query, a URL)."""
    match = _DOI_PATTERN.search(text)
    return normalize_doi(match.group(1)) if match else None


def arxiv_id(value: str | None) -> str | None:
    """The version-less arXiv id in an arXiv URL, an arXiv DOI, `arXiv:<id>` or a bare id; None otherwise."""
    if not value:
        return None
    text = _ARXIV_PREFIX.sub("", value.strip())
    doi_match = _ARXIV_DOI.match(normalize_doi(text) or "")
    if doi_match:
        text = doi_match.group(1)
    else:
        url_match = _ARXIV_URL.match(text)
        if url_match:
            text = url_match.group(1)
        elif "://" in text:
            return None
    for pattern in (_ARXIV_NEW_ID, _ARXIV_OLD_ID):
        match = pattern.fullmatch(text)
        if match:
            return match.group(1).lower()
    return None


def arxiv_doi(identifier: str) -> str:
    """The DOI arXiv registers for every paper (DataCite prefix 10.48550)."""
    return f"10.48550/arxiv.{identifier.lower()}"


def identity_keys(url: str, doi: str | None) -> list[str]:
    """Every key under which a source may meet a copy of itself: DOI, arXiv id, canonical URL."""
    keys: list[str] = []
    normalized = normalize_doi(doi)
    if normalized:
        keys.append(f"doi:{normalized}")
    paper = arxiv_id(normalized) or arxiv_id(url)
    if paper:
        keys.append(f"arxiv:{paper}")
    keys.append(f"url:{canonical_url(url)}")
    return keys


def first_of_each_group(identities: Sequence[tuple[str, str | None]]) -> list[int]:
    """For each (url, doi), the position of the first item of its group of copies of one source.

    Items are one source when they share any identity key, transitively: `a` and `c` join through a
    `b` that shares a DOI with `a` and an arXiv id with `c`, wherever `b` comes in the sequence.
    """
    parent = list(range(len(identities)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    first_holder: dict[str, int] = {}
    for position, (url, doi) in enumerate(identities):
        for key in identity_keys(url, doi):
            holder = first_holder.setdefault(key, position)
            if holder != position:
                a, b = root(holder), root(position)
                parent[max(a, b)] = min(a, b)
    return [root(i) for i in range(len(identities))]
