"""Counts read as English in event messages (issue 24: "1 cycles" on the page)."""

from __future__ import annotations

from research_tool.core.wording import plural


def test_one_is_singular_and_every_other_count_plural() -> None:
    assert plural(1, "source") == "1 source"
    assert [plural(n, "cycle") for n in (0, 2, 11)] == ["0 cycles", "2 cycles", "11 cycles"]
    assert plural(1, "query", "queries") == "1 query"
    assert plural(3, "new entity", "new entities") == "3 new entities"
