"""The collect step files every search result under one source: the same paper found by several providers
(by DOI, by arXiv id, or by URL) is one entry in the session's sources."""

from __future__ import annotations

from typing import Any

from research_tool.graph.nodes.collect import merge_outcomes
from research_tool.models.entities import SourceResult
from research_tool.providers.gateway import SearchOutcome


def _result(provider: str, url: str, **fields: Any) -> SourceResult:
    return SourceResult(url=url, title=f"from {provider}", source_name=provider, **fields)


def _outcome(provider: str, *results: SourceResult) -> SearchOutcome:
    return SearchOutcome(provider=provider, query="attention is all you need", results=list(results))


def test_one_paper_from_arxiv_semantic_scholar_and_pubmed_is_one_source() -> None:
    outcomes = [
        _outcome(
            "arxiv",
            _result("arxiv", "https://arxiv.org/abs/1706.03762v5", authors=["Ashish Vaswani"], snippet="short"),
        ),
        _outcome(
            "semantic_scholar",
            # arXiv's DOI, no arXiv URL: joins the arXiv copy through the arXiv id
            _result(
                "semantic_scholar",
                "https://www.semanticscholar.org/paper/p1",
                doi="10.48550/arXiv.1706.03762",
                published_date="2017-06-12",
            ),
            _result("semantic_scholar", "https://www.semanticscholar.org/paper/p2", doi="10.1038/NATURE12373"),
        ),
        _outcome(
            "pubmed", _result("pubmed", "https://pubmed.ncbi.nlm.nih.gov/1/", doi="https://doi.org/10.1038/nature12373")
        ),
        _outcome(
            "tavily",
            _result("tavily", "https://Example.com/page?utm_campaign=x#top"),
            _result("tavily", "https://example.com/page"),
        ),
    ]

    found = merge_outcomes(outcomes, {}, iteration=1)

    assert list(found) == [
        "https://arxiv.org/abs/1706.03762v5",
        "https://www.semanticscholar.org/paper/p2",
        "https://example.com/page",
    ]
    paper = found["https://arxiv.org/abs/1706.03762v5"]
    assert paper["found_by"] == ["arxiv", "semantic_scholar"]
    assert paper["authors"] == ["Ashish Vaswani"]
    assert paper["doi"] == "10.48550/arXiv.1706.03762" and paper["published_date"] == "2017-06-12"
    assert found["https://www.semanticscholar.org/paper/p2"]["found_by"] == ["semantic_scholar", "pubmed"]
    assert found["https://example.com/page"]["best_rank"] == 1


def test_a_result_that_links_two_copies_joins_them_wherever_it_comes() -> None:
    # the arXiv copy (id only) and the journal copy (DOI only) share nothing until the third result
    outcomes = [
        _outcome("arxiv", _result("arxiv", "https://arxiv.org/abs/2202.12139v1")),
        _outcome(
            "semantic_scholar",
            _result("semantic_scholar", "https://www.semanticscholar.org/paper/q", doi="10.1109/ICSTW55395.2022.00035"),
        ),
        _outcome("arxiv", _result("arxiv", "http://arxiv.org/abs/2202.12139v2", doi="10.1109/icstw55395.2022.00035")),
    ]
    found = merge_outcomes(outcomes, {}, iteration=1)
    assert list(found) == ["https://arxiv.org/abs/2202.12139v1"]
    assert found["https://arxiv.org/abs/2202.12139v1"]["found_by"] == ["arxiv", "semantic_scholar"]


def test_a_known_source_found_again_by_arxiv_id_keeps_its_key() -> None:
    known = {
        "https://www.semanticscholar.org/paper/p1": {
            "url": "https://www.semanticscholar.org/paper/p1",
            "doi": "10.48550/arxiv.1706.03762",
            "found_by": ["semantic_scholar"],
        }
    }
    outcomes = [_outcome("arxiv", _result("arxiv", "https://arxiv.org/abs/1706.03762v7"))]
    found = merge_outcomes(outcomes, known, iteration=2)
    assert list(found) == ["https://www.semanticscholar.org/paper/p1"]
    assert found["https://www.semanticscholar.org/paper/p1"]["found_by"] == ["arxiv"]  # the reducer unions it in


def test_different_sici_dois_stay_different_sources() -> None:
    outcomes = [
        _outcome(
            "pubmed",
            _result(
                "pubmed",
                "https://pubmed.ncbi.nlm.nih.gov/1/",
                doi="10.1002/(SICI)1097-4636(199706)35:4<419::AID-JBM1>3.0.CO;2-L",
            ),
            _result(
                "pubmed",
                "https://pubmed.ncbi.nlm.nih.gov/2/",
                doi="10.1002/(SICI)1097-4636(199706)35:4<425::AID-JBM3>3.0.CO;2-K",
            ),
        )
    ]
    assert len(merge_outcomes(outcomes, {}, iteration=1)) == 2
