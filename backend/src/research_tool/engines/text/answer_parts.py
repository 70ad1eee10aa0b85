"""The question's parts, and which of them the chosen answer leaves unanswered: the report's "Not found in the
sources" gaps are computed here, after the answer is chosen, and never name a part the answer fills.

A question has its main part (what `slots.required_slots` says it asks: a person, a date, a verdict ...) and may
have more joined to it ("Who founded the bakery and when?": a date too). When the sources do not answer, the main
part is the gap; when they do, each further part the answer's sentences do not fill (no date among them for
"and when?") is one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from research_tool.engines.text.answer_checks import NUMBER_RE, TIME_RE
from research_tool.engines.text.answering import AnswerSelection
from research_tool.engines.text.entities import find_mentions
from research_tool.engines.text.slots import Slot, required_slots
from research_tool.engines.text.tokens import is_stopword

_JOINED_PART_RE = re.compile(
    r"(?:,\s*|\s+)(?:and|&)\s+(when|where|who|why|how much|how many|how long|how old|what year|which year)\b",
    re.IGNORECASE,
)
_PART_KINDS = {
    "when": "date",
    "what year": "date",
    "which year": "date",
    "where": "place",
    "who": "person",
    "why": "reason",
    "how much": "number",
    "how many": "number",
    "how long": "number",
    "how old": "number",
}
_DESCRIPTIONS = {
    "person": "who (a person or group)",
    "date": "when (a date)",
    "place": "where (a place)",
    "number": "a quantity",
    "reason": "why (a reason)",
    "method": "how it is done",
    "yes_no": "a yes or no to the question",
    "definition": "what it is",
}
_REASON_RE = re.compile(r"\b(?:because|since|so that|due to|owing to|as a result|in order to|reason)\b", re.IGNORECASE)
_NOT_A_HEAD = frozenset(["happens", "happened", "happen", "does", "did", "do", "is", "are", "was", "were"])


@dataclass(frozen=True)
class Part:
    kind: str
    description: str


def question_parts(question: str) -> list[Part]:
    """The main part, then each part joined to it ("... and when?")."""
    main = required_slots(question)[0]
    parts = [Part(main.kind, describe(main))]
    for match in _JOINED_PART_RE.finditer(question):
        kind = _PART_KINDS[" ".join(match.group(1).casefold().split())]
        parts.append(Part(kind, f"{_DESCRIPTIONS[kind]}, the question's further part"))
    return parts


def describe(slot: Slot) -> str:
    """The slot in words a reader understands: "when (a date)", "the colour", or "a direct answer" for a slot
    whose head word names nothing ("What happens if ...?")."""
    if slot.kind in _DESCRIPTIONS:
        return _DESCRIPTIONS[slot.kind]
    head = slot.terms[-1] if slot.terms else ""
    if slot.kind == "entity" and head and not is_stopword(head) and head.casefold() not in _NOT_A_HEAD:
        return f"the {' '.join(slot.terms)}"
    return "a direct answer to the question"


def fills(kind: str, text: str) -> bool:
    """The answer's text holds a value of the part's kind."""
    if kind == "date":
        return TIME_RE.search(text) is not None or any(m.entity_type == "date" for m in find_mentions(text))
    if kind == "number":
        return NUMBER_RE.search(text) is not None
    if kind in ("person", "place"):
        return any(m.entity_type not in ("date", "number", "concept") for m in find_mentions(text))
    if kind == "reason":
        return _REASON_RE.search(text) is not None
    return True


def unanswered_parts(question: str, selection: AnswerSelection) -> list[str]:
    """The parts the chosen answer does not answer: the main one when the sources do not answer, else each
    further part its sentences do not fill."""
    parts = question_parts(question)
    if not selection.answered:
        return [parts[0].description]
    text = " ".join(c.statement for c in selection.sentences)
    return [p.description for p in parts[1:] if not fills(p.kind, text)]
