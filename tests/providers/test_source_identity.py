"""Source identity: canonical URLs, DOIs (SICI ones included), arXiv ids, and which results are one source."""

from __future__ import annotations

import pytest

from research_tool.providers.source_identity import (
    arxiv_id,
    canonical_url,
    find_doi,
    first_of_each_group,
    identity_keys,
    normalize_doi,
)

# Two Wiley SICI DOIs from one journal issue (J. Biomed. Mater. Res. 35(4), June 1997): they differ
# only inside the angle-bracketed contribution segment.
SICI_A = "10.1002/(SICI)1097-4636(199706)35:4<419::AID-JBM1>3.0.CO;2-L"
SICI_B = "10.1002/(SICI)1097-4636(199706)35:4<425::AID-JBM3>3.0.CO;2-K"


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


def test_doi_forms_normalise_to_one_lowercase_doi() -> None:
    assert normalize_doi("https://doi.org/10.1038/NATURE12373") == "10.1038/nature12373"
    assert normalize_doi("doi:10.1016/0005-2795(76)90109-4") == "10.1016/0005-2795(76)90109-4"
    assert normalize_doi("not a doi") is None
    assert find_doi("see 10.1109/ICSTW55395.2022.00035.") == "10.1109/icstw55395.2022.00035"
    # a parenthesis that belongs to the prose around a DOI is not part of it; one inside it is
    assert find_doi("(doi 10.1016/S0140-6736(20)30183-5)") == "10.1016/s0140-6736(20)30183-5"


def test_sici_dois_keep_their_angle_bracket_segment() -> None:
    a, b = normalize_doi(SICI_A), normalize_doi(SICI_B)
    assert a == SICI_A.lower() and b == SICI_B.lower()
    assert a != b  # the old pattern cut both at "<": 10.1002/(sici)1097-4636(199706)35:4
    # a doi.org link escapes the brackets; it is the same DOI
    escaped = "https://doi.org/" + SICI_A.replace("<", "%3C").replace(">", "%3E")
    assert normalize_doi(escaped) == a
    assert find_doi(f'<a href="https://doi.org/{SICI_B}">{SICI_B}</a>') == b
    # an HTML tag right after an ordinary DOI still ends it
    assert find_doi("<td>10.1038/nature12373</td>") == "10.1038/nature12373"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("https://arxiv.org/abs/2202.12139v1", "2202.12139"),
        ("http://arxiv.org/pdf/hep-th/9901001v2", "hep-th/9901001"),
        ("10.48550/arXiv.1706.03762", "1706.03762"),
        ("arXiv:2202.12139", "2202.12139"),
        ("arXiv:2202.12139v3", "2202.12139"),
        ("arxiv:hep-th/9901001", "hep-th/9901001"),
        ("2202.12139", "2202.12139"),
        ("https://example.com/abs/2202.12139", None),
        ("arXiv:", None),
    ],
)
def test_arxiv_id(value: str, expected: str | None) -> None:
    assert arxiv_id(value) == expected


def test_identity_keys_name_doi_arxiv_id_and_url() -> None:
    assert identity_keys("https://arxiv.org/abs/2202.12139v1", None) == [
        "arxiv:2202.12139",
        "url:https://arxiv.org/abs/2202.12139v1",
    ]
    assert identity_keys("https://www.semanticscholar.org/paper/p", "10.48550/arXiv.1706.03762")[:2] == [
        "doi:10.48550/arxiv.1706.03762",
        "arxiv:1706.03762",
    ]


def test_groups_are_transitive_and_led_by_their_first_item() -> None:
    identities: list[tuple[str, str | None]] = [
        ("https://arxiv.org/abs/2202.12139v1", None),  # 0: arXiv id only
        ("https://www.semanticscholar.org/paper/q", "10.1109/icstw55395.2022.00035"),  # 1: journal DOI only
        ("http://arxiv.org/abs/2202.12139v2", "10.1109/ICSTW55395.2022.00035"),  # 2: both: joins 0 and 1
        ("https://Example.com/page?utm_campaign=x#top", None),  # 3
        ("https://example.com/page", None),  # 4: same canonical URL as 3
        ("https://doi.org/x", SICI_A),  # 5
        ("https://doi.org/y", SICI_B),  # 6: a different SICI DOI from the same issue
    ]
    assert first_of_each_group(identities) == [0, 0, 0, 3, 3, 5, 6]
