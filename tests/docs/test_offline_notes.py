"""docs/providers-offline.md quotes the answer's notes as the engine writes them (issue 43, item 4: it promised a
"Degraded mode" note where an offline run's answer says which providers were not reachable)."""

from __future__ import annotations

import re
from pathlib import Path

from research_tool.engines.base import NumberedSource, SynthesisInput
from research_tool.engines.text.synthesis import _notes
from research_tool.models.entities import SourceResult

DOC = Path(__file__).resolve().parents[2] / "docs" / "providers-offline.md"


def quoted_notes() -> list[str]:
    text = " ".join(DOC.read_text(encoding="utf-8").split())
    return re.findall(r'"((?:Not reachable|Degraded mode)[^"]*)"', text)


def notes_for(source_names: list[str], unreachable: list[str], degraded: bool) -> list[str]:
    sources = [
        NumberedSource(n=i + 1, source=SourceResult(url=f"file:///d/{i}.md", title="t", source_name=name))
        for i, name in enumerate(source_names)
    ]
    request = SynthesisInput(
        query="q", sources=sources, facts=[], degraded_mode=degraded, unreachable_providers=unreachable
    )
    return [note.strip("_") for note in _notes(request, answered=True)]


def test_the_offline_page_quotes_the_notes_the_answer_carries() -> None:
    offline, none_answered = quoted_notes()
    assert notes_for(["local"], ["wikipedia"], degraded=True) == [offline]
    assert notes_for([], [], degraded=True) == [none_answered]
