"""Canonical URLs and the keys that say two results are the same source.

URLs are normalized with courlan (scheme/host case, default ports, tracking parameters, sorted
query) and lose their fragment; non-http(s) URLs (the local provider's `file://...#id`) are kept
as they are, because their fragment names a document. A paper found by arXiv, Semantic Scholar
and PubMed merges into one source by DOI, or by arXiv id when no DOI is shared.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import urlsplit, urlunsplit

import courlan

from research_tool.models.entities import SourceResult

_DOI_PATTERN = re.compile(r"\b(10\.\d{4,9}/[^\s\"'<>]+)", re.IGNORECASE)
_DOI_PREFIXES = ("https://doi.org/", "http://doi.org/", "https://dx.doi.org/", "http://dx.doi.org/", "doi:")
# arXiv's own DOIs (DataCite): 10.48550/arXiv.2202.12139
_ARXIV_DOI = re.compile(r"^10\.48550/arxiv\.(.+)$", re.IGNORECASE)
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
    """`https://doi.org/10.1038/X`, `doi:10.1038/x` and `10.1038/X` all give `10.1038/x`."""
    if not raw:
        return None
    text = raw.strip()
    lowered = text.lower()
    for prefix in _DOI_PREFIXES:
        if lowered.startswith(prefix):
            text = text[len(prefix) :]
            break
    match = _DOI_PATTERN.search(text)
    if not match:
        return None
    return match.group(1).rstrip(".,;)").lower()


def find_doi(text: str) -> str | None:
    """The first DOI mentioned anywhere in `text` (a query, a URL)."""
    match = _DOI_PATTERN.search(text)
    return normalize_doi(match.group(1)) if match else None


def arxiv_id(value: str | None) -> str | None:
    """The version-less arXiv id in an arXiv URL, an arXiv DOI or a bare id; None otherwise."""
    if not value:
        return None
    text = value.strip()
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


def dedup_keys(source: SourceResult) -> list[str]:
    """Every key under which `source` may meet a duplicate: DOI, arXiv id, canonical URL."""
    keys: list[str] = []
    doi = normalize_doi(source.doi)
    if doi:
        keys.append(f"doi:{doi}")
    paper = arxiv_id(doi) or arxiv_id(source.url)
    if paper:
        keys.append(f"arxiv:{paper}")
    keys.append(f"url:{canonical_url(source.url)}")
    return keys


def source_key(source: SourceResult) -> str:
    """The one key a source is filed under: DOI first, then arXiv id, then canonical URL."""
    return dedup_keys(source)[0]


def merge_pair(kept: SourceResult, other: SourceResult) -> SourceResult:
    """`kept` with the gaps filled from `other` (first seen wins; longer text wins)."""
    update: dict[str, object] = {}
    if not kept.doi and other.doi:
        update["doi"] = other.doi
    if not kept.authors and other.authors:
        update["authors"] = list(other.authors)
    if not kept.published_date and other.published_date:
        update["published_date"] = other.published_date
    if len(other.snippet) > len(kept.snippet):
        update["snippet"] = other.snippet
    if len(other.full_content or "") > len(kept.full_content or ""):
        update["full_content"] = other.full_content
    if other.quality_score > kept.quality_score:
        update["quality_score"] = other.quality_score
    return kept.model_copy(update=update) if update else kept


def merge_duplicates(sources: Iterable[SourceResult]) -> list[SourceResult]:
    """Merge results that share any dedup key (DOI, arXiv id or canonical URL), in first-seen order.

    Sharing is transitive (a Semantic Scholar record with both a DOI and an arXiv id joins the
    arXiv and PubMed copies of the same paper). Every URL in the output is canonical.
    """
    items = [s.model_copy(update={"url": canonical_url(s.url)}) for s in sources]
    parent = list(range(len(items)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    first_holder: dict[str, int] = {}
    for position, item in enumerate(items):
        for key in dedup_keys(item):
            if key in first_holder:
                a, b = root(first_holder[key]), root(position)
                parent[max(a, b)] = min(a, b)
            else:
                first_holder[key] = position

    groups: dict[int, SourceResult] = {}
    for position, item in enumerate(items):
        group = root(position)
        groups[group] = merge_pair(groups[group], item) if group in groups else item
    return [groups[g] for g in sorted(groups)]
