"""Short answers from the fitted span ranker and its gate, on small invented sentences: a typed question gets
the whole span of its type, a sentence without one gives none, and no span is a clause fragment."""

from __future__ import annotations

import pytest

from research_tool.engines.base import NumberedSource
from research_tool.engines.text.answering import asked_for, select_answer
from research_tool.engines.text.question_intent import classify_question
from research_tool.engines.text.short_answers import candidate_spans
from research_tool.engines.text.tokens import is_stopword
from research_tool.models.entities import SourceResult


def one_page(title: str, text: str) -> list[NumberedSource]:
    return [
        NumberedSource(
            n=1, source=SourceResult(url="file:///notes.jsonl#1", title=title, source_name="local", full_content=text)
        )
    ]


@pytest.mark.parametrize(
    ("question", "sentence", "short"),
    [
        ("When was the Vesk lighthouse built?", "The Vesk lighthouse was built in 1874 by the harbour board.", "1874"),
        ("When did the Orla ferry sink?", "The Orla ferry sank on 2 May 1936 off the Vesk reef.", "2 May 1936"),
        ("Who founded the Varn guild?", "The Varn guild was founded by Ann Lee in the old town.", "Ann Lee"),
        ("How many towers does the Tolt castle have?", "The Tolt castle has 14 towers and a moat.", "14"),
    ],
)  # fmt: skip
def test_a_typed_question_gets_the_whole_span_of_its_type(question: str, sentence: str, short: str) -> None:
    selection = select_answer(question, one_page("Notes", sentence))
    assert selection.answered
    assert selection.short_answer == short


@pytest.mark.parametrize(
    ("question", "sentence"),
    [
        ("When was the Vesk lighthouse built?", "The Vesk lighthouse was built by the harbour board of the town."),
        ("Who was the keeper of the Vesk lighthouse?", "The keeper of the Vesk lighthouse was Mara Holt's cousin."),
    ],
)
def test_a_sentence_without_a_span_of_the_asked_type_gives_no_short_answer(question: str, sentence: str) -> None:
    selection = select_answer(question, one_page("Notes", sentence))
    assert selection.answered
    assert selection.short_answer is None


def test_no_candidate_span_is_a_clause_fragment() -> None:
    asked = asked_for(classify_question("Who built the Vesk lighthouse?"))
    sentence = "In 1874 the Vesk lighthouse was built by Mara Holt's crew, who came from the Orla islands."
    texts = [c.text for c in candidate_spans(asked, sentence)]
    assert "Orla islands" in texts and "1874" in texts
    for text in texts:
        words = text.split()
        assert not is_stopword(words[0]) and not is_stopword(words[-1])  # no "by ...", "... the"
        # no function word but a phrase's own ("of", "and"), no question word: "was built by", "who came from"
        assert not any(w in ("was", "by", "who", "from", "built") for w in words)
        assert "," not in text  # not across a clause break
        assert not text.endswith("'s") and text != "Mara Holt"  # a possessive modifies: "Mara Holt's crew"
