"""The fitted answer ranker on one-sentence corpora written for this test: a sentence that plainly answers is
answered and leads; a question no source touches, or a sentence of the wrong kind, is not an answer."""

from __future__ import annotations

import pickle
from collections.abc import Sequence

import pytest

from research_tool.engines.base import NumberedSource, SynthesisInput
from research_tool.engines.text.answering import RULES, rank_candidates, select_answer
from research_tool.engines.text.candidates import build_candidates
from research_tool.engines.text.entities import extract_entities
from research_tool.engines.text.question_intent import classify_question
from research_tool.engines.text.ranker import (
    FEATURES,
    SEMANTIC_CANDIDATES,
    SEMANTIC_FEATURES,
    bm25_scores,
    load_model,
)
from research_tool.engines.text.synthesis import synthesize_draft
from research_tool.models.entities import SourceResult
from research_tool.providers.local_corpus.embeddings import unavailable_reason
from research_tool.providers.local_corpus.similarity import EncoderSimilarity, answer_similarity


def corpus(title: str, text: str) -> list[NumberedSource]:
    return [
        NumberedSource(
            n=1, source=SourceResult(url="file:///one.txt", title=title, source_name="local", full_content=text)
        )
    ]


ONE_SENTENCE_CORPORA = [
    (
        "asyncio notes",
        "Asyncio tasks can be cancelled with Task.cancel(), which raises CancelledError in the task.",
        "how do I cancel an asyncio task",
    ),
    (
        "Bread",
        "Bake the bread at 220 degrees Celsius for 35 minutes.",
        "At what temperature should the bread be baked?",
    ),
    ("Harbour", "The Vesk lighthouse was built in 1874 by the harbour board.", "When was the Vesk lighthouse built?"),
    (
        "Orchard",
        "The Glass Orchard was written by Edda Lorne during one winter on the coast.",
        "Who wrote The Glass Orchard?",
    ),
    (
        "Rivers",
        "The river Tolt rises in the Marrow Hills and flows into the Grey Sea.",
        "Where does the river Tolt rise?",
    ),
    (
        "Bridge",
        "The Varn bridge has eleven stone arches across the river.",
        "How many arches does the Varn bridge have?",
    ),
    (
        "Moss",
        "Moss dies back in summer because the shallow soil dries out completely.",
        "Why does the moss die back in summer?",
    ),
    (
        "Kettle",
        "A kettlebell is a cast iron weight shaped like a ball with a handle.",
        "What is a kettlebell?",
    ),
    (
        "Choir",
        "The Quell choir is run by the Ostrava Music Society, a charity founded by local teachers.",
        "Which organization runs the Quell choir?",
    ),
    (
        "git notes",
        "To undo the last commit but keep its changes, run git reset --soft HEAD~1.",
        "How do I undo the last git commit but keep the changes?",
    ),
]


@pytest.mark.parametrize(("title", "sentence", "question"), ONE_SENTENCE_CORPORA)
def test_a_sentence_that_plainly_answers_is_answered_and_leads(title: str, sentence: str, question: str) -> None:
    selection = select_answer(question, corpus(title, sentence))
    assert selection.answered, question
    assert selection.sentences[0].statement == sentence


def test_a_question_no_source_touches_is_not_answered() -> None:
    selection = select_answer(
        "Which orchestra first performed the Quell symphony?",
        corpus("Bread", "Bake the bread at 220 degrees Celsius for 35 minutes."),
    )
    assert not selection.answered and selection.short_answer is None


def test_a_sentence_of_the_wrong_kind_is_no_answer() -> None:
    sources = corpus(
        "unittest — Unit testing framework",
        "assertTupleEqual(first, second, msg=None) tests that two tuples are equal.\n\n"
        "msg: Optional message to use on failure instead of a list of differences.",
    )
    selection = select_answer("What is the difference between a list and a tuple?", sources)
    assert not selection.answered and selection.short_answer is None


def test_a_difference_question_is_answered_by_a_sentence_naming_both_sides() -> None:
    sources = corpus(
        "Sequences",
        "A list can be changed after it is made, while a tuple cannot: the difference is mutability.",
    )
    selection = select_answer("What is the difference between a list and a tuple?", sources)
    assert selection.answered


def test_the_weights_file_names_every_feature_and_a_threshold() -> None:
    model = load_model()
    assert set(model.weights) == set(FEATURES)
    assert 0.0 < model.answered_at < 1.0


def test_bm25_prefers_the_sentence_with_the_rarer_question_term() -> None:
    pool = [["bridge", "stone"], ["bridge", "arch"], ["bridge", "river"]]
    scores = bm25_scores(["bridge", "arch"], pool)
    assert scores.index(max(scores)) == 1
    assert bm25_scores(["bridge"], []) == []


def test_entities_leave_out_stopwords_literals_abbreviations_and_fragments() -> None:
    text = (
        "Like the others, the flag may be True or None (a default), e.g. when Genghis Khan rides to Kaifeng "
        "and calls asyncio.Task."
    )
    names = {e.name for e in extract_entities(text, "file:///x", 0)}
    assert not names & {"Like", "True", "None", "e.g", "(a"}
    assert "Genghis Khan" in names


def test_a_lead_naming_only_its_own_page_subject_hands_over_to_the_sentence_with_the_answer() -> None:
    sources = corpus(
        "Orla Venn",
        "Orla Venn (1811–1870) was a Danish painter of harbour scenes. "
        "Her godfather was the shipwright Tomas Hald, a friend of her mother.",
    )
    question = "Who was the godfather of the Danish painter of harbour scenes?"
    without = select_answer(question, sources, rules=RULES - {"second_hop"})
    assert without.sentences[0].statement.startswith("Orla Venn (1811")  # the page's subject is not the answer
    selection = select_answer(question, sources)
    assert selection.answered
    assert selection.sentences[0].statement.startswith("Her godfather was the shipwright Tomas Hald")
    assert selection.short_answer != "Orla Venn"


LIGHTHOUSE = "The Vesk lighthouse was built in 1874 by the harbour board."


@pytest.mark.parametrize(
    ("title", "sentence", "question", "short"),
    [
        ("Harbour", LIGHTHOUSE, "When was the Vesk lighthouse built?", "1874"),
        ("Orchard", "The Glass Orchard was written by Edda Lorne.", "Who wrote The Glass Orchard?", "Edda Lorne"),
        ("Vesk", "Under the old charter, the Vesk lighthouse stands at the harbour mouth.",
         "Where does the Vesk lighthouse stand?", "harbour mouth"),
        ("Vesk", "In Europe there are old lighthouses like the Vesk lighthouse.",
         "Where are old lighthouses like the Vesk lighthouse?", "Europe"),
        ("Vesk", "The keeper of the Vesk lighthouse was Mara Holt's cousin.",
         "Who was the keeper of the Vesk lighthouse?", None),
    ],
)  # fmt: skip
def test_a_short_answer_is_a_whole_span_of_the_asked_type_or_none(
    title: str, sentence: str, question: str, short: str | None
) -> None:
    """No clause fragment ("Under the old charter") and no possessive ("Mara Holt's" of "Mara Holt's cousin");
    "Europe" is the whole place asked for (the old span rules read "In Europe" and had to refuse it)."""
    selection = select_answer(question, corpus(title, sentence))
    assert selection.answered
    assert selection.short_answer == short


# --- the semantic feature (the `semantic` extra's encoder, passed in as a similarity) --------------------

PARAGRAPH = (
    "The Varn bridge crosses the river at the old ford. Its builders were paid in grain. "
    "The bridge toll was abolished when the railway came. Eleven stone arches carry the road. "
    "The river floods most springs. Carts once queued at the ford. The town grew around the bridge. "
    "A chapel stood at its east end. The chapel burned in a storm. Fishermen still moor below it."
)


class RecordingSimilarity:
    """A similarity written for the test: the cosines it is told, and a record of what it was asked."""

    def __init__(self, cosines: dict[str, float] | None = None) -> None:
        self.cosines = cosines or {}
        self.calls: list[tuple[str, list[str]]] = []

    def __call__(self, question: str, sentences: Sequence[str]) -> list[float]:
        self.calls.append((question, list(sentences)))
        return [self.cosines.get(s, 0.1) for s in sentences]


def test_the_similarity_is_asked_once_about_the_lexical_rankers_best_sentences_only() -> None:
    similarity = RecordingSimilarity()
    question = "How many arches does the Varn bridge have?"
    select_answer(question, corpus("Varn bridge", PARAGRAPH), similarity=similarity)
    assert len(similarity.calls) == 1
    asked, sentences = similarity.calls[0]
    assert asked == question
    assert 0 < len(sentences) <= SEMANTIC_CANDIDATES
    assert "Eleven stone arches carry the road." in sentences


def test_the_semantic_weight_set_is_used_only_with_a_similarity() -> None:
    assert set(load_model(semantic=True).weights) == set(FEATURES) | set(SEMANTIC_FEATURES)
    assert not set(load_model().weights) & set(SEMANTIC_FEATURES)
    assert load_model(semantic=True).weights["semantic"] > 0.0


def test_a_paraphrase_the_encoder_recognises_can_lead() -> None:
    """The question shares no content word with the sentence that answers it; the similarity says it answers."""
    answer = "Fishermen still moor below it."
    question = "Where do boats tie up near the Varn bridge?"
    sources = corpus("Varn bridge", ". ".join(PARAGRAPH.split(". ")[:4]) + ". " + answer)

    def lead(similarity: RecordingSimilarity | None) -> str:
        pool = rank_candidates(classify_question(question), build_candidates(sources), similarity=similarity)
        return max(pool, key=lambda c: c.score).statement

    assert lead(None) != answer
    assert lead(RecordingSimilarity({answer: 0.9})) == answer


def test_the_synthesis_step_passes_its_similarity_to_the_selection() -> None:
    similarity = RecordingSimilarity()
    request = SynthesisInput(
        query="How many arches does the Varn bridge have?",
        sources=corpus("Varn bridge", PARAGRAPH),
        facts=[],
        similarity=similarity,
    )
    synthesize_draft(request)
    assert similarity.calls
    assert "similarity" not in request.model_dump()


def test_no_similarity_is_handed_out_unless_semantic_search_is_on() -> None:
    assert answer_similarity(False) is None


def test_the_encoder_similarity_pickles_for_the_cpu_pool_without_loading_anything() -> None:
    request = SynthesisInput(query="q", sources=[], facts=[], similarity=EncoderSimilarity())
    assert isinstance(pickle.loads(pickle.dumps(request)).similarity, EncoderSimilarity)


@pytest.mark.skipif(unavailable_reason(allow_download=False) is not None, reason="the semantic extra's encoder")
@pytest.mark.parametrize(("title", "sentence", "question"), ONE_SENTENCE_CORPORA)
def test_with_the_encoder_a_sentence_that_plainly_answers_is_answered_and_leads(
    title: str, sentence: str, question: str
) -> None:
    selection = select_answer(question, corpus(title, sentence), similarity=EncoderSimilarity())
    assert selection.answered, question
    assert selection.sentences[0].statement == sentence
