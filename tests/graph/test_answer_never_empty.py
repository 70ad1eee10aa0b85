"""The report's answer is never just a note: when the citation check removed every statement, it says the
sources do not answer and shows what survived."""

from __future__ import annotations

from research_tool.engines.base import FindingDraft, SynthesisDraft
from research_tool.graph.nodes.synthesize import never_empty


def test_an_answer_left_with_only_notes_says_not_answered_and_lists_findings() -> None:
    draft = SynthesisDraft(
        answer="_Research stopped early: the time limit was reached._",
        findings=[FindingDraft(statement="The Varn bridge opened in 1871 [1].", citations=[1])],
        short_answer="1871",
        answered=True,
    )
    fixed = never_empty(draft)
    assert fixed.answered is False and fixed.short_answer is None
    lines = fixed.answer.split("\n")
    assert lines[0].startswith("_The sources found do not answer this question.")
    assert lines[1] == "The Varn bridge opened in 1871 [1]."
    assert fixed.answer.endswith("_Research stopped early: the time limit was reached._")


def test_an_answer_with_a_statement_is_left_alone() -> None:
    draft = SynthesisDraft(
        answer="The Varn bridge opened in 1871 [1].\n\n_Research stopped early._", short_answer="1871"
    )
    assert never_empty(draft) == draft
