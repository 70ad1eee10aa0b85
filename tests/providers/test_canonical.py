"""URL canonicalization and the merging of one paper found by several providers."""

from __future__ import annotations

import pytest

from research_tool.models.entities import SourceResult
from research_tool.providers.source_identity import (
    arxiv_id,
    canonical_url,
    dedup_keys,
    find_doi,
    merge_duplicates,
    normalize_doi,
)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("HTTPS://Example.COM:443/a/b?utm_source=x&b=2&a=1#frag", "https://example.com/a/b?a=1&b=2"),
        ("http://blog.python.org/x.html?fbclid=1&gclid=2&q=3", "http://blog.python.org/x.html?q=3"),
        ("https://example.com", "https://example.com/"),
        ("http://Example.com:8080/p", "http://example.com:8080/p"),
        ("file:///docs/corpus.jsonl#doc-7", "file:///docs/corpus.jsonl#doc-7"),
    ],
)
def test_canonical_url(raw: str, expected: str) -> None:
    assert canonical_url(raw) == expected


def test_doi_and_arxiv_identifiers() -> None:
    assert normalize_doi("https://doi.org/10.1038/NATURE12373") == "10.1038/nature12373"
    assert normalize_doi("doi:10.1016/0005-2795(76)90109-4") == "10.1016/0005-2795(76)90109-4"
    assert normalize_doi("not a doi") is None
    assert find_doi("see 10.1109/ICSTW55395.2022.00035.") == "10.1109/icstw55395.2022.00035"
    assert arxiv_id("https://arxiv.org/abs/2202.12139v1") == "2202.12139"
    assert arxiv_id("http://arxiv.org/pdf/hep-th/9901001v2") == "hep-th/9901001"
    assert arxiv_id("10.48550/arXiv.1706.03762") == "1706.03762"
    assert arxiv_id("https://example.com/abs/2202.12139") is None


def _source(provider: str, url: str, **fields: object) -> SourceResult:
    return SourceResult(url=url, title=f"from {provider}", source_name=provider, **fields)  # type: ignore[arg-type]


def test_same_paper_from_arxiv_semantic_scholar_and_pubmed_merges_into_one() -> None:
    arxiv = _source(
        "arxiv",
        "https://arxiv.org/abs/1706.03762v5",
        doi="10.48550/arxiv.1706.03762",
        authors=["Ashish Vaswani"],
        snippet="short",
    )
    s2 = _source(
        "semantic_scholar",
        "https://www.semanticscholar.org/paper/p1",
        doi="10.48550/arXiv.1706.03762",
        snippet="a much longer abstract from Semantic Scholar",
        published_date="2017-06-12",
    )
    journal = _source("pubmed", "https://pubmed.ncbi.nlm.nih.gov/1/", doi="10.1038/nature12373")
    journal_s2 = _source(
        "semantic_scholar",
        "https://www.semanticscholar.org/paper/p2",
        doi="https://doi.org/10.1038/NATURE12373",
        authors=["G. Kucsko"],
    )
    other = _source("tavily", "https://Example.com/page?utm_campaign=x#top")
    same_page = _source("brave", "https://example.com/page")

    merged = merge_duplicates([arxiv, s2, journal, journal_s2, other, same_page])

    assert [m.source_name for m in merged] == ["arxiv", "pubmed", "tavily"]
    paper, article, page = merged
    assert paper.url == "https://arxiv.org/abs/1706.03762v5"
    assert paper.snippet == "a much longer abstract from Semantic Scholar"
    assert paper.authors == ["Ashish Vaswani"] and paper.published_date == "2017-06-12"
    assert article.authors == ["G. Kucsko"]
    assert page.url == "https://example.com/page"


def test_arxiv_copy_without_doi_joins_through_its_id() -> None:
    plain = _source("arxiv", "https://arxiv.org/abs/2202.12139v1")
    with_journal_doi = _source("arxiv", "http://arxiv.org/abs/2202.12139v2", doi="10.1109/ICSTW55395.2022.00035")
    journal = _source(
        "semantic_scholar", "https://www.semanticscholar.org/paper/q", doi="10.1109/icstw55395.2022.00035"
    )
    assert "arxiv:2202.12139" in dedup_keys(plain)
    assert len(merge_duplicates([plain, journal, with_journal_doi])) == 1
