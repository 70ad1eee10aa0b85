from __future__ import annotations

from typing import Any, cast

from research_tool.graph.report_assembly import build_entities
from research_tool.models.state import ResearchState


def _entity(name: str, sources: int) -> dict[str, Any]:
    return {"name": name, "entity_type": "other", "sources": [f"https://e.test/{i}" for i in range(sources)]}


def test_the_report_lists_names_not_words_capitalised_because_a_sentence_opened_with_them() -> None:
    facts = {
        "f1": {"statement": "Ensure the valve is closed before Marrowby opens the sluice."},
        "f2": {"statement": "The keeper will ensure that the gate stays shut."},
        "f3": {"statement": "Marrowby and the Tolt Board share the sluice."},
    }
    entities = {
        "ensure": _entity("Ensure", 2),
        "marrowby": _entity("Marrowby", 1),
        "tolt board": _entity("Tolt Board", 1),
    }
    state = cast(ResearchState, {"facts": facts, "entities": entities})
    assert [e.name for e in build_entities(state)] == ["Marrowby", "Tolt Board"]
