"""The question's required slots: what kind of answer it needs, and whether the facts fill it.

"Who directed ..." needs a person; "when" a date; "where" a place; "how many" a number; "which X"
an X; "is/are ..." a yes/no verdict about each named thing; "why" a reason; "how" a method. A
relative clause ("the <noun> who <verb> <X>") is a bridge slot: an entity that must be
found before the main slot can be (multi-hop). A slot is filled when a relevant fact carries what it
needs; reflection aims the next queries at the empty ones.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from research_tool.engines.text.entities import find_mentions
from research_tool.engines.text.keyphrases import query_words
from research_tool.engines.text.tokens import stem, stem_set
from research_tool.models.entities import Fact

SlotKind = Literal["person", "date", "place", "number", "entity", "yes_no", "reason", "method", "definition", "topic"]

RELEVANT_FACT = 0.3  # a fact below this relevance does not fill a slot

_PERSON_HEADS = frozenset(
    """
    woman man person people actor actress singer author writer director player artist musician politician founder
    president leader composer poet scientist inventor wife husband son daughter father mother brother sister girl
    boy child star
    """.split()
)
_PLACE_HEADS = frozenset(
    """
    city town country state place village region county island location nation
    """.split()
)
_DATE_HEADS = frozenset(["year", "date", "decade", "century", "day", "month", "era"])
_WORK_HEADS = frozenset(["film", "movie", "song", "album", "book", "novel", "show", "series", "play", "game", "band"])
_CAUSE_CUES = frozenset(["because", "due", "cause", "caus", "reason", "result", "lead", "since", "therefore", "owing"])
_METHOD_CUES = frozenset(
    """
    use call pass set run by using via step first then configure return raise
    """.split()
)
_DEFINITION_RE = re.compile(r"\b(?:is|are|was|were|refers to|means|denotes|defined as)\b", re.IGNORECASE)

_RELATIVE_RE = re.compile(
    r"\b(?:the|a|an)\s+((?:[a-z-]+\s+){0,2}?)([a-z-]+)\s+(?:who|that|which|whose|whom|where)\b", re.IGNORECASE
)


@dataclass(frozen=True)
class Slot:
    name: str  # "answer" or "bridge:<head>" or "subject:<name>"
    kind: SlotKind
    terms: tuple[str, ...] = ()  # words the slot is about (head noun, named thing)
    description: str = ""


@dataclass
class SlotReport:
    slots: list[Slot]
    filled: dict[str, bool] = field(default_factory=dict)
    fillers: dict[str, str] = field(default_factory=dict)  # slot name -> the entity or fact id that filled it

    @property
    def unfilled(self) -> list[Slot]:
        return [s for s in self.slots if not self.filled.get(s.name)]

    @property
    def all_filled(self) -> bool:
        return all(self.filled.get(s.name) for s in self.slots)


def required_slots(question: str) -> list[Slot]:
    """The answer slot, bridge slots from relative clauses, and per-subject slots for yes/no comparisons."""
    text = question.strip()
    lowered = text.casefold()
    first = lowered.split()[0] if lowered.split() else ""
    slots: list[Slot] = [_answer_slot(text, lowered, first)]
    for match in _RELATIVE_RE.finditer(text):
        head = match.group(2).casefold()
        if head in ("one", "thing", "way"):
            continue
        kind: SlotKind = "person" if head in _PERSON_HEADS else "place" if head in _PLACE_HEADS else "entity"
        if kind == "entity" and head in _DATE_HEADS:
            kind = "date"
        clause = text[match.start() : min(len(text), match.end() + 60)].split("?")[0]
        slots.append(
            Slot(f"bridge:{head}", kind, (head,), f"the {head} {clause[match.end() - match.start() :].strip()}")
        )
    if slots[0].kind == "yes_no":
        for mention in find_mentions(text):
            if mention.entity_type not in ("date", "number"):
                slots.append(Slot(f"subject:{mention.text}", "topic", tuple(query_words(mention.text)), mention.text))
    return slots


def which_slot(phrase: str) -> Slot:
    """The answer slot of "which/what <phrase> ...": a person, place, date or other entity by its head noun."""
    head_words = tuple(w for w in phrase.split() if w not in ("kind", "type", "sort", "of"))
    head = head_words[-1] if head_words else ""
    kind: SlotKind = (
        "person"
        if head in _PERSON_HEADS
        else "place"
        if head in _PLACE_HEADS
        else "date"
        if head in _DATE_HEADS
        else "entity"
    )
    return Slot("answer", kind, head_words, f"the {phrase}")


# "Am I allowed ...?", "Would it ...?", "Isn't it ...?": more openings of a yes/no question
_MORE_YES_NO_OPENINGS = frozenset(
    "am would may might must shall isn't aren't wasn't weren't don't doesn't didn't can't won't hasn't haven't".split()
)
_CONDITIONAL_RE = re.compile(r"^if [^,?]{1,80},\s*(\S+)")


def _conditional_yes_no(lowered: str) -> bool:
    """ "If I buy a ticket, can I come back another day?": a yes/no question after a condition."""
    match = _CONDITIONAL_RE.match(lowered)
    return match is not None and match.group(1) in (
        "is are was were do does did can could has have had will should".split() + sorted(_MORE_YES_NO_OPENINGS)
    )


def _answer_slot(text: str, lowered: str, first: str) -> Slot:
    if re.match(
        r"^(?:how many|how much|how old|how long|how far|how big|how large|what percentage|what number)\b", lowered
    ):
        return Slot("answer", "number", (), "a quantity")
    if first in ("who", "whom", "whose"):
        return Slot("answer", "person", (), "a person or group")
    if first == "when" or re.match(r"^(?:in )?(?:what|which) (?:year|date|decade|century|month|day)\b", lowered):
        return Slot("answer", "date", (), "a date")
    if first == "where" or re.match(
        r"^(?:in )?(?:what|which) (?:city|country|state|place|town|county|region)\b", lowered
    ):
        return Slot("answer", "place", (), "a place")
    if first == "why":
        return Slot("answer", "reason", (), "a reason")
    if (
        first
        in (
            "is",
            "are",
            "was",
            "were",
            "do",
            "does",
            "did",
            "can",
            "could",
            "has",
            "have",
            "had",
            "will",
            "should",
        )
        or first in _MORE_YES_NO_OPENINGS
        or _conditional_yes_no(lowered)
    ):
        return Slot("answer", "yes_no", (), "a yes/no verdict")
    which = re.match(
        r"^(?:in |of |for )?(?:which|what)\s+((?:[a-z-]+\s+){0,2}?[a-z-]+)\s+"
        r"(?:is|was|are|were|did|does|do|has|had|held|has been)\b",
        lowered,
    )
    if which:
        return which_slot(which.group(1))
    if first == "how":
        return Slot("answer", "method", (), "how it is done or works")
    if re.match(r"^(?:what|who) (?:is|are|was|were)\b", lowered) or len(lowered.split()) <= 3:
        return Slot("answer", "definition", (), "what it is")
    embedded = _embedded_wh_slot(lowered)
    if embedded is not None:
        return embedded
    return Slot("answer", "topic", (), "a direct answer")


def _embedded_wh_slot(lowered: str) -> Slot | None:
    """A wh-word inside or at the end of the question: "... is whom?", "... based where?", "what company?"."""
    tail = lowered.rstrip(" ?.!")
    if re.search(r"\bhow (?:many|much|old|long)\b", tail):
        return Slot("answer", "number", (), "a quantity")
    if re.search(r"\b(?:who|whom)$", tail):
        return Slot("answer", "person", (), "a person or group")
    if re.search(r"\bwhere$", tail):
        return Slot("answer", "place", (), "a place")
    if re.search(r"\bwhen$", tail):
        return Slot("answer", "date", (), "a date")
    which = re.search(r"\b(?:which|what)\s+((?:[a-z-]+\s+){0,2}?[a-z-]+)$", tail) or re.search(
        r"\b(?:which|what)\s+([a-z-]+)\b", tail
    )
    if not which:
        return None
    if which.group(1).split()[0] in ("is", "was", "are", "were", "did", "does", "do", "has", "had"):
        return None
    return which_slot(which.group(1))


def evaluate_slots(question: str, facts: Sequence[Fact]) -> SlotReport:
    """Which of the question's slots the facts fill (only facts at least RELEVANT_FACT relevant count)."""
    slots = required_slots(question)
    question_stems = stem_set(question)
    question_names = {m.text.casefold() for m in find_mentions(question)}
    report = SlotReport(slots=slots)
    relevant = sorted((f for f in facts if f.relevance >= RELEVANT_FACT), key=lambda f: -f.relevance)
    for slot in slots:
        for fact in relevant:
            filler = _fills(slot, fact, question_stems, question_names)
            if filler:
                report.filled[slot.name] = True
                report.fillers[slot.name] = filler
                break
        else:
            report.filled[slot.name] = False
    return report


def _fills(slot: Slot, fact: Fact, question_stems: frozenset[str], question_names: set[str]) -> str | None:
    statement = fact.statement
    stems = stem_set(statement)
    new_names = [
        m
        for m in find_mentions(statement)
        if m.text.casefold() not in question_names and not set(stem_set(m.text)) <= question_stems
    ]
    if slot.kind == "person":
        return next((m.text for m in new_names if m.entity_type == "person"), None)
    if slot.kind == "date":
        return next((m.text for m in find_mentions(statement) if m.entity_type == "date"), None)
    if slot.kind == "place":
        return next((m.text for m in new_names if m.entity_type == "place"), None)
    if slot.kind == "number":
        return next((m.text for m in find_mentions(statement) if m.entity_type == "number"), None) or (
            next((w for w in statement.split() if re.fullmatch(r"\d[\d,.]*", w)), None)
        )
    if slot.kind == "entity":
        head = {stem(t) for t in slot.terms}
        if head & stems and len(stems - question_stems) >= 2:
            return fact.id
        return None
    if slot.kind == "reason":
        return fact.id if {stem(w) for w in _CAUSE_CUES} & stems else None
    if slot.kind == "method":
        return fact.id if {stem(w) for w in _METHOD_CUES} & stems else None
    if slot.kind == "definition":
        return fact.id if _DEFINITION_RE.search(statement) else None
    if slot.kind == "topic" and slot.terms:
        terms = {stem(t) for t in slot.terms}
        subject_stems = stem_set(fact.subject or "")
        return fact.id if terms <= (stems | subject_stems) else None
    return fact.id if fact.relevance >= 0.5 else None
