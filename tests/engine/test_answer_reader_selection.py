"""How the answer selection uses a reader (question, [(sentence, context)] -> probabilities): its mix with the
lexical ranker picks the lead, a lead it finds unlikely is refused with the closest sentences quoted, a yes/no
question about one thing is decided by the reader's deciding sentence, and a reader that gives nothing leaves the
lexical ranker alone. The reader here is a small function written for the test (the trained one has its own test
in tests/providers/test_answer_reader_model.py)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from research_tool.engines.base import NumberedSource
from research_tool.engines.text import answering
from research_tool.engines.text.answering import select_answer
from research_tool.engines.text.reader_mix import ReaderMix, collection_kind, load_mix
from research_tool.engines.text.verdicts import polarity_verdict
from research_tool.models.entities import SourceResult

RAILWAY = (
    "The Kestrel Valley Railway Society was founded in 1968 to save the line from closure. "
    "It was opened in 1887 by the Kestrel Valley Company to carry slate to the coast. "
    "Volunteers work as drivers, guards and signal staff on every running day. "
    "There is no lift at Kestrel Halt, and the footbridge has 32 steps."
)


def corpus(text: str) -> list[NumberedSource]:
    return [
        NumberedSource(
            n=1,
            source=SourceResult(
                url="file:///railway.md", title="Kestrel Valley Railway", source_name="local", full_content=text
            ),
        )
    ]


def reader_liking(words: str, high: float = 0.97, low: float = 0.02) -> object:
    def read(question: str, passages: Sequence[tuple[str, str]]) -> list[float]:
        return [high if words in sentence else low for sentence, _ in passages]

    return read


def test_the_reader_moves_the_sentence_that_answers_to_the_lead() -> None:
    question = "When did the Kestrel Valley Railway open?"
    lexical = select_answer(question, corpus(RAILWAY))
    read = select_answer(question, corpus(RAILWAY), reader=reader_liking("opened in 1887"))  # type: ignore[arg-type]
    assert read.answered
    assert read.sentences[0].statement.startswith("It was opened in 1887")
    assert lexical.sentences[0].statement != read.sentences[0].statement or lexical.sentences[0].statement.startswith(
        "It was opened"
    )


def test_the_reader_reads_the_title_and_the_sentence_before() -> None:
    seen: list[tuple[str, str]] = []

    def read(question: str, passages: Sequence[tuple[str, str]]) -> list[float]:
        seen.extend(passages)
        return [0.5] * len(passages)

    select_answer("When did the railway open?", corpus(RAILWAY), reader=read)
    contexts = dict(seen)
    assert contexts["It was opened in 1887 by the Kestrel Valley Company to carry slate to the coast."] == (
        "Kestrel Valley Railway: The Kestrel Valley Railway Society was founded in 1968 to save the line from closure."
    )


def test_a_lead_the_reader_finds_unlikely_is_refused_with_the_closest_quoted() -> None:
    unlikely = load_mix().refusal_threshold(collection_kind([RAILWAY])) / 2
    selection = select_answer(
        "How much does a child ticket cost?",
        corpus(RAILWAY),
        reader=reader_liking("nothing", low=unlikely),  # type: ignore[arg-type]
    )
    assert not selection.answered
    assert selection.closest


def test_a_yes_no_question_is_decided_by_the_readers_deciding_sentence() -> None:
    selection = select_answer("Is there a lift at Kestrel Halt?", corpus(RAILWAY), reader=reader_liking("no lift"))  # type: ignore[arg-type]
    assert selection.answered and selection.verdict == "No"
    assert selection.sentences[0].statement.startswith("There is no lift")


def test_a_reader_that_gives_nothing_leaves_the_lexical_ranker_alone() -> None:
    question = "When did the Kestrel Valley Railway open?"
    lexical = select_answer(question, corpus(RAILWAY))
    silent = select_answer(question, corpus(RAILWAY), reader=lambda q, p: [])
    assert [c.statement for c in silent.sentences] == [c.statement for c in lexical.sentences]
    assert silent.answered == lexical.answered


def test_polarity_verdict() -> None:
    assert polarity_verdict("Is there a lift?", "There is no lift, and the stairs are steep.") == "No"
    assert polarity_verdict("Can I bring my dog?", "Dogs are welcome in every room.") == "Yes"
    assert polarity_verdict("Isn't breakfast included?", "Breakfast is included in every rate.") == "Yes"
    assert polarity_verdict("Is there no parking?", "There is no parking at the museum.") == "Yes"
    assert polarity_verdict("Does the memory backend keep entries?", "It doesn't keep anything after exit.") == "No"


def test_a_how_to_question_over_prose_pages_is_read_one_over_an_api_page_is_not() -> None:
    prose = (
        "Several worker processes use one store when the job runner starts one worker for each core of the machine. "
        "To share it between them, open it with a file lock, which each of them then takes in turn."
    )
    question = "How do I use one store from several worker processes?"
    read = select_answer(question, corpus(prose), reader=reader_liking("file lock"))  # type: ignore[arg-type]
    assert read.answered and read.sentences[0].statement.startswith("To share it between them")
    asked: list[str] = []

    def reading(q: str, passages: Sequence[tuple[str, str]]) -> list[float]:
        asked.append(q)
        return [0.5] * len(passages)

    api = "store.open(path, *, lock=None)\n\nOpen the store at path; lock='file' shares it between worker processes."
    select_answer(question, corpus(api), reader=reading)
    assert asked == []  # its call signature leads (howto_answer), unread


def test_a_lead_the_reader_read_stands_and_is_not_handed_over_by_a_second_hop() -> None:
    painter = [
        NumberedSource(
            n=1,
            source=SourceResult(
                url="file:///orla-venn.md",
                title="Orla Venn",
                source_name="local",
                full_content="Orla Venn (1811-1870) was a Danish painter of harbour scenes. "
                "Her godfather was the shipwright Tomas Hald, a friend of her mother.",
            ),
        )
    ]
    question = "Who was the godfather of the Danish painter of harbour scenes?"
    unread = select_answer(question, painter)
    assert unread.sentences[0].statement.startswith("Her godfather")  # the lexical lead names only its page: hopped
    read = select_answer(question, painter, reader=reader_liking("Danish painter"))  # type: ignore[arg-type]
    assert read.answered and read.sentences[0].statement.startswith("Orla Venn (1811")
    agreeing = select_answer(question, painter, reader=reader_liking("godfather was"))  # type: ignore[arg-type]
    assert agreeing.sentences[0].statement.startswith("Her godfather")


HANDBOOK = """# Kestrel Valley Railway: visiting

## Tickets

An adult return ticket costs £14, and a child ticket costs £7.

## Access

There is no lift at Kestrel Halt, and the footbridge has 32 steps.
"""


def test_the_kind_of_collection_is_read_from_the_sources_text() -> None:
    assert collection_kind([RAILWAY, "It was opened in 1887 by the Kestrel Valley Company."]) == "passages"
    assert collection_kind([HANDBOOK]) == "documents"
    assert collection_kind(["Last orders at ten.\n\nThe bar opens at noon."]) == "documents"  # two paragraphs
    assert collection_kind(["| Ticket | Price |\n| --- | --- |\n| Adult | £14 |"]) == "documents"  # a table
    assert collection_kind([HANDBOOK, RAILWAY]) == "passages"  # at least half


def test_each_kind_of_collection_is_refused_at_its_own_threshold(monkeypatch: pytest.MonkeyPatch) -> None:
    mix = ReaderMix(
        reader=1.0,
        lexical=0.5,
        read_top=16,
        answered_at=0.1,
        yes_no_at=0.0,
        answered_at_by_kind={"passages": 0.05, "documents": 0.3},
    )
    monkeypatch.setattr(answering, "load_mix", lambda: mix)
    reader = reader_liking("child ticket", high=0.2, low=0.01)  # between the two kinds' thresholds
    question = "How much does a child ticket cost?"
    passage = "An adult return ticket costs £14, and a child ticket costs £7."
    assert select_answer(question, corpus(passage), reader=reader).answered  # type: ignore[arg-type]
    assert not select_answer(question, corpus(HANDBOOK), reader=reader).answered  # type: ignore[arg-type]
    surer = reader_liking("child ticket", high=0.5, low=0.01)  # above both
    assert select_answer(question, corpus(HANDBOOK), reader=surer).answered  # type: ignore[arg-type]
    assert mix.refusal_threshold("documents") == 0.3
    assert ReaderMix(1.0, 0.5, 16, 0.1, 0.0).refusal_threshold("documents") == 0.1  # none fitted: the shared one
