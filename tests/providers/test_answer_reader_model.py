"""The shipped answer reader (the `semantic` extra's runtime, the packaged base weights and our adapters): it loads
without torch, checks its adapters' digest, and reads a question together with a sentence and its context. Skips,
saying why, where the extra or the base weights are not installed."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from research_tool.providers.local_corpus.embeddings import unavailable_reason
from research_tool.providers.local_corpus.reader import (
    ADAPTERS,
    AnswerReader,
    ReaderUnavailableError,
    answer_reader,
)

REASON = unavailable_reason(allow_download=False)
pytestmark = pytest.mark.skipif(REASON is not None, reason=f"the answer reader cannot run here: {REASON}")


@pytest.fixture(scope="module")
def reader() -> AnswerReader:
    return AnswerReader()


def test_it_reads_the_sentence_that_answers_above_one_that_only_shares_words(reader: AnswerReader) -> None:
    question = "When did the Kestrel Valley Railway open?"
    passages = [
        (
            "It was opened in 1887 by the Kestrel Valley Company to carry slate to the coast.",
            "Kestrel Valley Railway: The line runs for nine miles from Pelham to the sea.",
        ),
        (
            "The Kestrel Valley Railway Society was founded in 1968.",
            "Kestrel Valley Railway: Volunteers run the trains.",
        ),
    ]
    opened, founded = reader(question, passages)
    assert 0.0 < founded < opened < 1.0


def test_probabilities_do_not_depend_on_the_batch(reader: AnswerReader) -> None:
    question = "How much does a child ticket cost?"
    alone = reader(
        question, [("A child ticket costs £4 and under-fives travel free.", "Fares: Adult tickets cost £9.")]
    )
    batched = reader(
        question,
        [
            ("A child ticket costs £4 and under-fives travel free.", "Fares: Adult tickets cost £9."),
            ("The café is open on every running day and serves hot food until two in the afternoon.", "Visit:"),
        ],
    )
    assert alone[0] == pytest.approx(batched[0], abs=1e-4)
    assert reader(question, []) == []


def test_adapters_that_do_not_match_their_card_are_refused(tmp_path: Path) -> None:
    copy = tmp_path / ADAPTERS.name
    shutil.copy(ADAPTERS, copy)
    card = json.loads(ADAPTERS.with_suffix(".json").read_text(encoding="utf-8"))
    card["adapters_sha256"] = "0" * 64
    copy.with_suffix(".json").write_text(json.dumps(card), encoding="utf-8")
    with pytest.raises(ReaderUnavailableError):
        AnswerReader(adapters=copy)


def test_a_corrupted_adapters_file_is_refused_with_a_clear_message(tmp_path: Path) -> None:
    copy = tmp_path / ADAPTERS.name
    damaged = bytearray(ADAPTERS.read_bytes())
    damaged[len(damaged) // 2] ^= 0xFF  # one byte flipped: the card is the shipped one
    copy.write_bytes(bytes(damaged))
    shutil.copy(ADAPTERS.with_suffix(".json"), copy.with_suffix(".json"))
    with pytest.raises(ReaderUnavailableError, match=r"reader_adapters\.npz does not match its card's digest"):
        AnswerReader(adapters=copy)


def test_it_is_on_by_default_and_off_with_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    assert answer_reader() is not None
    monkeypatch.setenv("RESEARCH_ANSWER_READER", "0")
    assert answer_reader() is None
