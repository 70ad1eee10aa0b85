"""Compaction rules (seed 000 §9): when to compact, and what the model keeps seeing."""

from __future__ import annotations

import pytest

from research_tool.engines.compaction import (
    REASON_BEFORE_SYNTHESIS,
    REASON_BUDGET_LOW,
    REASON_STATE_TOO_LARGE,
    compact_sources,
    estimate_tokens,
    should_compact,
)
from research_tool.models.entities import SourceResult


@pytest.mark.parametrize(
    ("used", "budget", "state", "before", "reason"),
    [
        (0, 1000, 10, False, None),
        (750, 1000, 10, False, None),  # exactly 25% left is not below 25%
        (751, 1000, 10, False, REASON_BUDGET_LOW),
        (2000, 1000, 10, False, REASON_BUDGET_LOW),
        (0, 1000, 50_001, False, REASON_STATE_TOO_LARGE),
        (0, 1000, 50_000, False, None),
        (0, 1000, 10, True, REASON_BEFORE_SYNTHESIS),
        (900, 1000, 60_000, True, REASON_BUDGET_LOW),  # the most pressing reason wins
    ],
)
def test_should_compact(used: int, budget: int, state: int, before: bool, reason: str | None) -> None:
    assert should_compact(used, budget, state, before) == reason


def _state_sources() -> dict[str, dict]:
    sources = {}
    for i in range(6):
        url = f"https://example.org/{i}"
        sources[url] = {
            **SourceResult(
                url=url,
                title=f"Source {i}",
                snippet=f"Snippet {i}. Second sentence.",
                source_name="local",
                full_content=f"Full text of source {i}. " * 200,
            ).model_dump(mode="json"),
            "first_iteration": i // 2,  # two sources per cycle: 0,0,1,1,2,2
            "found_by": ["local"],
        }
    return sources


def test_compact_keeps_the_most_recent_whole_and_the_rest_as_citable_handles() -> None:
    sources = _state_sources()

    kept, summary = compact_sources(sources, keep_recent=2)

    assert [s["url"] for s in kept] == ["https://example.org/4", "https://example.org/5"]
    assert all(s["full_content"] for s in kept)
    assert summary.kept == 2 and summary.compacted == 4
    assert summary.compacted_urls == [f"https://example.org/{i}" for i in range(4)]
    assert [h["url"] for h in summary.handles] == summary.compacted_urls
    assert all(h["full_content"] is None and h["snippet"] for h in summary.handles)
    assert all(h["found_by"] == ["local"] for h in summary.handles)  # bookkeeping survives
    assert "- Source 0 (https://example.org/0): Snippet 0." in summary.digest
    assert summary.tokens_after < summary.tokens_before / 2


def test_handles_convert_back_to_source_results() -> None:
    sources = [
        SourceResult.model_validate(s | {})
        for s in ({k: v for k, v in src.items() if k in SourceResult.model_fields} for src in _state_sources().values())
    ]
    _, summary = compact_sources(sources, keep_recent=1)
    assert all(SourceResult.model_validate(h).full_content is None for h in summary.handles)


def test_keeping_more_than_there_is_compacts_nothing() -> None:
    kept, summary = compact_sources(_state_sources(), keep_recent=10)
    assert len(kept) == 6 and summary.compacted == 0 and summary.handles == []


def test_estimate_tokens_counts_serialized_state() -> None:
    assert estimate_tokens("") == 0
    assert estimate_tokens("abcd" * 100) == 100
    state = {"sources": _state_sources()}
    assert estimate_tokens(state) > 6 * 200 * len("Full text of source 0. ") // 4
