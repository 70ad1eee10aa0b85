"""What a question asks for: its expected answer type, its weighted terms (names weigh more), the named
things it mentions and the noun a "which <kind>" question asks about. Also how much of the question's terms
a sentence states (`coverage`), each term weighed by its rarity in the candidate pool (`idf_weights`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from research_tool.engines.text.entities import find_mentions
from research_tool.engines.text.howto_queries import is_howto
from research_tool.engines.text.keyphrases import query_words
from research_tool.engines.text.ranker import matched
from research_tool.engines.text.slots import required_slots, which_slot
from research_tool.engines.text.tokens import content_stems, is_stopword, stem

AnswerType = Literal[
    "person", "place", "date", "number", "organization", "thing", "yes_no", "howto", "definition", "reason"
]
VALUE_TYPES: frozenset[str] = frozenset(["date", "number"])  # answer types that are values, not names

NAME_WEIGHT = 1.5  # a question term inside a name weighs this much more
CONTEXT_SHARE = 0.5  # a question term found only in the title or antecedent counts this much
_ORG_HEADS = frozenset(
    ["company", "organization", "organisation", "band", "group", "team", "club", "university", "college",
     "school", "party", "network", "agency", "firm", "label", "publisher", "newspaper", "magazine", "church"]
)  # fmt: skip
_PERSON_HEADS = frozenset(
    ["person", "man", "woman", "actor", "actress", "author", "writer", "novelist", "poet", "singer", "musician",
     "composer", "songwriter", "vocalist", "guitarist", "drummer", "rapper", "comedian", "player", "footballer",
     "athlete", "coach", "director", "producer", "politician", "president", "king", "queen", "prince",
     "princess", "emperor", "ruler", "leader", "founder", "artist", "painter", "sculptor", "architect",
     "scientist", "economist", "philosopher", "inventor", "explorer", "journalist", "anchor", "host",
     "minister", "governor", "senator", "judge", "general", "officer", "chancellor", "pope", "bishop",
     # everyday roles: "Which vet ...?", "Which speaker ...?" ask for a person too
     "vet", "doctor", "dentist", "nurse", "surgeon", "hygienist", "teacher", "tutor", "speaker", "presenter",
     "lecturer", "conductor", "chair", "chairman", "chairwoman", "secretary", "treasurer", "manager", "landlord",
     "landlady", "tenant", "owner", "chef", "baker", "guide", "ranger", "instructor", "mechanic", "volunteer",
     "trustee", "organiser", "organizer", "receptionist", "engineer", "pharmacist", "solicitor", "accountant"]
)  # fmt: skip
# words that name the answer's type, not its topic ("in what year", "how many people"): a sentence need not repeat them
_TYPE_WORDS: dict[str, frozenset[str]] = {
    "date": frozenset(["year", "date", "decade", "century", "month", "day", "time"]),
    "number": frozenset(["number", "many", "much", "amount"]),
    "person": frozenset(["name", "person"]),
    "place": frozenset(["place", "location"]),
    "thing": frozenset(["name"]),
}
PREPOSITIONS = frozenset(
    ["into", "to", "from", "in", "on", "at", "with", "by", "for", "about", "after", "before", "under", "over",
     "out", "up", "off", "through", "during", "against", "upon"]
)  # fmt: skip


@dataclass(frozen=True)
class QuestionIntent:
    """What the question asks for."""

    text: str
    answer_type: AnswerType
    weights: dict[str, float]  # question content stem -> weight (names weigh more)
    names: tuple[str, ...]  # named things the question mentions (display form)
    name_stems: frozenset[str]
    head_terms: frozenset[str] = frozenset()  # "which <head>": the head noun's stems
    head_noun: str | None = None  # its last word's stem ("which American show" -> "show"), when a noun
    links_pages: bool = False  # a bridge clause ("the director of X was born where?"): the answer needs two pages

    @property
    def stems(self) -> frozenset[str]:
        return frozenset(self.weights)


def classify_question(question: str) -> QuestionIntent:
    """The question's expected answer type, weighted terms and named things."""
    text = " ".join(question.split())
    asked = _asked_sentence(text)
    slots = required_slots(asked)
    slot = slots[0]
    links_pages = any(s.name.startswith("bridge:") for s in (slots if asked == text else required_slots(text)))
    kind = slot.kind
    answer_type: AnswerType
    kind_of = _KIND_OF_RE.match(text)
    if kind == "entity" and not slot.terms and kind_of is not None:
        slot = which_slot(kind_of.group(1).casefold())  # "What type of prime distribution ...?": the distribution
    head_terms = frozenset(stem(t) for t in slot.terms)
    if is_howto(text):
        answer_type = "howto"
    elif kind in ("person", "place", "date", "number", "definition", "reason"):
        answer_type = kind
    elif kind == "yes_no":
        answer_type = "yes_no"
    elif kind == "entity" and set(slot.terms) & _ORG_HEADS:
        answer_type = "organization"
    elif kind == "entity" and _person_head(text):
        answer_type = "person"  # "which actor", "what Khitan prince": a kind of person
    else:
        answer_type = "thing"
    mentions = [m for m in find_mentions(text) if m.entity_type not in ("number",)]
    names = tuple(
        dict.fromkeys(m.text for m in mentions if (m.entity_type != "date" and m.start > 0) or _inner(m.text))
    )
    weights: dict[str, float] = {}
    for word in query_words(text):
        for key in content_stems(word):
            if key in _TYPE_WORDS.get(answer_type, ()):
                continue
            if answer_type == "howto" and (key == "python" or (word.casefold().endswith("ly") and len(word) > 5)):
                continue  # the language and manner adverbs ("safely", "efficiently") name no API
            weights[key] = 1.0
    name_stems: set[str] = set()
    for name in names:
        for key in content_stems(name):
            if answer_type == "howto" and key == "python":
                continue  # "in a Python program": the language, named or not, names no API
            weights[key] = NAME_WEIGHT
            name_stems.add(key)
    return QuestionIntent(
        text=text,
        answer_type=answer_type,
        weights=weights,
        names=names,
        name_stems=frozenset(name_stems),
        head_terms=head_terms,
        head_noun=_head_noun(text, slot.terms),
        links_pages=links_pages,
    )


_QUESTION_OPENER_RE = re.compile(
    r"^(?:what|which|who|whom|whose|when|where|why|how|is|are|was|were|do|does|did|has|have|had|can|could)\b",
    re.IGNORECASE,
)


def _asked_sentence(text: str) -> str:
    """ "X has an award. Does Y also have one?": the sentence that asks (the last, when it opens as a
    question does); the statements before it only set the scene."""
    pieces = re.split(r"(?<=[.!])\s+(?=[A-Z])", text)
    last = pieces[-1]
    return last if len(pieces) > 1 and _QUESTION_OPENER_RE.match(last) else text


_KIND_OF_RE = re.compile(
    r"^(?:in |of |for )?(?:which|what)\s+(?:kind|type|sort|form|variety)s?\s+of\s+((?:[\w-]+\s+){0,2}?[\w-]+)\s+"
    r"(?:is|was|are|were|did|does|do|has|had|have|can|could|will|would)\b",
    re.IGNORECASE,
)


def _person_head(text: str) -> bool:
    """ "Which television and movie actor ...?", "What Khitan prince ...?": the wh-word's noun phrase (its
    next few words, up to a function word) has a noun naming a kind of person."""
    match = re.search(r"\b(?:which|what)\s+", text, re.IGNORECASE)
    if match is None:
        return False
    for word in re.findall(r"[\w'’&-]+", text[match.end() :])[:5]:
        lowered = word.casefold()
        if lowered in _PERSON_HEADS or any(
            lowered.endswith(ending) and lowered[: -len(ending)] in _PERSON_HEADS for ending in ("s", "es")
        ):  # "actors", "actresses"
            return True
        if is_stopword(word) and lowered not in ("and", "or"):
            return False
    return False


def _head_noun(text: str, terms: Sequence[str]) -> str | None:
    """The stem of the noun a "what/which <head>" question asks about, or None: "What came into force?"
    names no kind (a preposition after the word marks a verb)."""
    if not terms:
        return None
    head = terms[-1].casefold()
    after = re.search(rf"\b({re.escape(head)})\s+(\w+)", text, re.IGNORECASE)
    if after is not None and after.group(1)[:1].isupper() and after.group(2).islower():
        # "Which American show ...": a capitalised word qualifies the noun that follows it
        head = after.group(2)
        after = re.search(rf"\b({re.escape(head)})\s+(\w+)", text, re.IGNORECASE)
    if head in PREPOSITIONS or (after is not None and after.group(2).casefold() in PREPOSITIONS):
        return None
    return stem(head)


def _inner(name: str) -> bool:
    return len(name.split()) >= 2


class Stemmed(Protocol):
    """A candidate sentence, as far as term weights go: its content stems."""

    @property
    def stems(self) -> frozenset[str]: ...


def idf_weights(intent: QuestionIntent, pool: Sequence[Stemmed]) -> dict[str, float]:
    """Each question term's weight times its inverse document frequency over the pool's sentences."""
    n = len(pool)
    weights = {}
    for key, base in intent.weights.items():
        df = sum(1 for c in pool if key in c.stems)
        weights[key] = base * (math.log((n + 1) / (1 + df)) + 1.0)
    return weights


def coverage(stems: frozenset[str], context: frozenset[str], weights: dict[str, float]) -> float:
    """The weighted share of the question's terms a sentence states (`stems`); a term found only around it
    (`context`: its page's title, the sentence it refers back to) counts `CONTEXT_SHARE`."""
    total = sum(weights.values())
    if not total:
        return 0.0
    own = matched(weights, stems)
    around = matched((k for k in weights if k not in own), context)
    hit = sum(weights[k] for k in own) + CONTEXT_SHARE * sum(weights[k] for k in around)
    return hit / total
