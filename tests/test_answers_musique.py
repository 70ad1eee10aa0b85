"""The MuSiQue answer set's figures: first sentence beside the BM25 baseline, anywhere, pages cited, answered."""

from __future__ import annotations

from typing import Any

from research_tool.eval.answers import summarize


def row(first: bool, base_first: bool, answered: bool) -> dict[str, Any]:
    return {
        "completed": True,
        "kind": "factoid",
        "first": first,
        "base_first": base_first,
        "anywhere": first,
        "both_pages": False,
        "base_both": True,
        "answered": answered,
        "markers": 2,
        "supported": 2,
        "words": 30,
        "duration_s": 1.0,
        "empty": False,
    }


def test_musique_figures_sit_beside_the_baseline() -> None:
    rows = [row(True, False, True), row(False, False, True), row(False, True, True), row(False, False, False)]
    lines = {name: (value, baseline) for name, value, _, baseline in summarize({"set": "musique", "rows": rows})}
    assert lines["musique_first_sentence"] == (0.25, 0.25)
    assert lines["musique_anywhere"] == (0.25, None)
    assert lines["musique_all_gold_cited"] == (0.0, 1.0)
    assert lines["musique_answered"][0] == 0.75
    assert lines["citation_precision"][0] == 1.0
    assert "hotpot_first_sentence" not in lines
