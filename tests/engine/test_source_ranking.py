"""Which sources the report draws on: title links between pages, never between chunks of one document."""

from __future__ import annotations

from research_tool.graph.decisions.source_ranking import propagate_links


def test_chunks_sharing_a_title_pass_no_score_to_each_other() -> None:
    sources = {
        "p1": {"title": "Tolt River", "full_content": "The Tolt River drains the Varn hills."},
        "p2": {"title": "Tolt River", "full_content": "Its delta is wide."},
        "p3": {"title": "Varn hills", "full_content": "Low hills of chalk."},
    }
    linked = propagate_links({"p1": 1.0, "p2": 0.2, "p3": 0.1}, sources)
    assert linked["p2"] == 0.2  # the other chunk of "Tolt River" is named in p1's text but gains nothing
    assert linked["p3"] > 0.1  # a different page named in p1's text still inherits
