from research_tool.engines.base import FindingDraft, NumberedSource, SynthesisDraft
from research_tool.graph.decisions.citations import check_citations, rank_sources_for_citation
from research_tool.models.entities import Evidence, Fact
from tests.engine.corpus_texts import KISS_AND_TELL, SHIRLEY_TEMPLE, source

SOURCES = [
    NumberedSource(n=1, source=source("file:///h#1", "Kiss and Tell (1945 film)", KISS_AND_TELL)),
    NumberedSource(n=2, source=source("file:///h#2", "Shirley Temple", SHIRLEY_TEMPLE)),
]


def test_forged_citation_is_caught_and_its_sentence_dropped() -> None:
    draft = SynthesisDraft(
        answer=(
            "Kiss and Tell is a 1945 American comedy film starring Shirley Temple as Corliss Archer [1]. "
            "Shirley Temple was the first woman on the Moon [99]."
        ),
        findings=[FindingDraft(statement="Shirley Temple was the first woman on the Moon.", citations=[99])],
    )
    checked = check_citations(draft, SOURCES)
    assert "[99]" not in checked.draft.answer and "Moon" not in checked.draft.answer
    assert checked.draft.answer.endswith("as Corliss Archer [1].")
    assert checked.draft.findings == []
    assert checked.removed_unresolvable == 2 and checked.sentences_dropped == 2


def test_unsupported_citation_removed_but_supported_one_kept() -> None:
    draft = SynthesisDraft(
        answer="Shirley Temple was named United States ambassador to Ghana [1][2].",
        findings=[
            FindingDraft(statement="She served as Chief of Protocol of the United States.", citations=[1, 2]),
            FindingDraft(statement="Shirley Temple was ambassador to Ghana in 1975.", citations=[2]),
        ],
    )
    checked = check_citations(draft, SOURCES)
    assert checked.draft.answer == "Shirley Temple was named United States ambassador to Ghana [2]."
    assert checked.draft.findings == [
        FindingDraft(statement="She served as Chief of Protocol of the United States.", citations=[2])
    ]
    # [1] twice (its text does not support them), and no passage of [2] states 1975
    assert checked.removed_unsupported == 3 and checked.sentences_dropped == 1


def test_support_threshold_is_a_parameter_and_markers_after_full_stop_work() -> None:
    draft = SynthesisDraft(answer="Temple acted in films and later served her country abroad. [2]")
    assert check_citations(draft, SOURCES, min_support=0.3).draft.answer.endswith("[2]")
    strict = check_citations(draft, SOURCES, min_support=0.95)
    assert strict.draft.answer == "" and strict.removed_unsupported == 1


def test_uncited_claims_dropped_or_marked_and_notes_kept() -> None:
    draft = SynthesisDraft(
        answer="Kiss and Tell was filmed on the Moon by robots.\n\n_Research stopped early: time limit._",
        gaps=["Not found: the government position."],
    )
    dropped = check_citations(draft, SOURCES)
    assert dropped.draft.answer == "_Research stopped early: time limit._"
    assert dropped.sentences_dropped == 1 and dropped.draft.gaps == draft.gaps
    marked = check_citations(draft, SOURCES, on_uncited="mark")
    assert "unverified" in marked.draft.answer and "robots" in marked.draft.answer


def test_sources_ranked_by_their_best_fact() -> None:
    def fact(text: str, url: str, relevance: float) -> Fact:
        return Fact(
            id=Fact.make_id(text), statement=text, relevance=relevance, evidence=[Evidence(source_url=url, quote=text)]
        )

    facts = [fact(f"Loosely related sentence number {i} here.", "file:///long", 0.3) for i in range(8)]
    facts.append(fact("The precise answer is stated here.", "file:///short", 0.7))
    assert rank_sources_for_citation(facts, 1) == ["file:///short"]
