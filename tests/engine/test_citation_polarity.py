"""Regression (issue 14): the default lexical citation check matched words, so a sentence saying the opposite
of its source with the same words ("precise" where the source says "little") kept its citation."""

from __future__ import annotations

import pytest

from research_tool.engines.base import NumberedSource, SynthesisDraft
from research_tool.graph.decisions.citations import check_citations
from research_tool.models.entities import SourceResult

SOURCE = SourceResult(
    url="https://example.org/dances",
    title="Bee dances",
    source_name="local",
    full_content=(
        "The round dance gives little information about its direction. "
        "The waggle dance gives the direction of the food. "
        "Warm weather increases the number of foraging trips. "
        "The hive does not store nectar in winter."
    ),
)


def kept(sentence: str) -> bool:
    checked = check_citations(SynthesisDraft(answer=f"{sentence} [1]."), [NumberedSource(n=1, source=SOURCE)])
    return bool(checked.draft.answer)


@pytest.mark.parametrize(
    "sentence",
    [
        "The round dance gives precise information about the direction",
        "The waggle dance never gives the direction of the food",
        "Warm weather decreases the number of foraging trips",
        "The hive stores nectar in winter",
    ],
)
def test_a_negated_or_antonym_claim_loses_its_citation(sentence: str) -> None:
    assert not kept(sentence)


@pytest.mark.parametrize(
    "sentence",
    [
        "The round dance gives little information about the direction",
        "The waggle dance gives the direction of the food",
        "Warm weather increases the number of foraging trips",
        "The hive does not store nectar in winter",
    ],
)
def test_a_claim_with_the_sources_polarity_keeps_it(sentence: str) -> None:
    assert kept(sentence)
