"""Regression (issue 14): splitting one long paragraph was quadratic (every full stop re-scanned the text
before it); a page without paragraph breaks must split in time linear in its length."""

from __future__ import annotations

from research_tool.engines.text.sentences import split_sentences
from tests.support.timing import cpu_seconds

UNIT = "The dance gives little information, e.g. for Dr. Smith in the U.S. at 3.11 p.m. on the hive. "


def paragraph(size: int) -> str:
    return UNIT * (size // len(UNIT))


def test_a_one_megabyte_paragraph_splits_in_well_under_a_second_per_megabyte() -> None:
    text = paragraph(1_000_000)
    started = cpu_seconds()  # CPU, not wall time: a busy machine does not stretch it (issue 43)
    sentences = split_sentences(text)
    elapsed = cpu_seconds() - started

    assert len(sentences) == text.count("hive.")  # abbreviations, initials and decimals never cut a sentence
    assert all(text[s.start : s.end] == s.text for s in sentences[:50])
    assert elapsed < 2.0, f"{elapsed:.2f} CPU-s for 1 MB (the quadratic splitter took minutes)"


def test_a_long_dotted_token_without_spaces_is_not_quadratic() -> None:
    text = "a." * 200_000 + " End of it."
    started = cpu_seconds()
    split_sentences(text)
    assert cpu_seconds() - started < 2.0


def test_abbreviations_still_hold_after_the_bounded_look_back() -> None:
    text = "Prof. J. R. R. Tolkien wrote it in the U.S. in 1937. Ph.D. students read it. See www.example.org now."
    assert [s.text for s in split_sentences(text)] == [
        "Prof. J. R. R. Tolkien wrote it in the U.S. in 1937.",
        "Ph.D. students read it.",
        "See www.example.org now.",
    ]
