"""Re-running a node merges by key instead of duplicating."""

from __future__ import annotations

from research_tool.models.state import merge_entities, merge_facts, merge_sources


def test_sources_merge_by_canonical_url_and_keep_fetched_text() -> None:
    a = {
        "https://x.org/a": {
            "url": "https://x.org/a",
            "title": "A",
            "full_content": None,
            "found_by": ["brave"],
            "first_iteration": 2,
            "best_rank": 3,
        }
    }
    b = {
        "https://x.org/a": {
            "url": "https://x.org/a",
            "title": "A",
            "full_content": "text",
            "found_by": ["exa"],
            "first_iteration": 1,
            "best_rank": 1,
        }
    }
    merged = merge_sources(a, b)
    assert list(merged) == ["https://x.org/a"]
    entry = merged["https://x.org/a"]
    assert entry["full_content"] == "text"
    assert entry["found_by"] == ["brave", "exa"]
    assert (entry["first_iteration"], entry["best_rank"]) == (1, 1)
    assert merge_sources(merged, b) == merged


def test_facts_union_evidence_once() -> None:
    ev1 = {"source_url": "u1", "quote": "q"}
    ev2 = {"source_url": "u2", "quote": "q"}
    left = {"f": {"id": "f", "statement": "s", "evidence": [ev1], "iteration": 1}}
    right = {"f": {"id": "f", "statement": "s", "evidence": [ev1, ev2], "iteration": 2, "verified": True}}
    merged = merge_facts(left, right)
    assert merged["f"]["evidence"] == [ev1, ev2]
    assert merged["f"]["iteration"] == 1 and merged["f"]["verified"] is True
    assert merge_facts(merged, right) == merged


def test_entity_mentions_count_distinct_sources() -> None:
    left = {
        "python": {
            "key": "python",
            "name": "Python",
            "sources": ["u1"],
            "mention_count": 1,
            "iteration": 1,
            "entity_type": "other",
        }
    }
    right = {
        "python": {
            "key": "python",
            "name": "Python",
            "sources": ["u1", "u2"],
            "mention_count": 2,
            "iteration": 2,
            "entity_type": "concept",
        }
    }
    merged = merge_entities(left, right)
    assert merged["python"]["mention_count"] == 2
    assert merged["python"]["entity_type"] == "concept"
    assert merge_entities(merged, right) == merged
