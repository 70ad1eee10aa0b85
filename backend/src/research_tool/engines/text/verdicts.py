"""Verdicts decided from each named thing's own page, not by the ranker: yes/no comparisons ("Are A and B both
X?", "Do A and B have the same X?") and choices ("Which came first, A or B?", by each option's year).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from research_tool.engines.text.candidates import Candidate, SourceDoc
from research_tool.engines.text.question_intent import QuestionIntent
from research_tool.engines.text.tokens import stem_set
from research_tool.models.entities import normalize_key

# --- choices ("which came first, A or B?") -----------------------------------------------------------

_EARLIEST_RE = re.compile(r"\b(?:first|earlier|earliest|older|oldest|before|sooner)\b", re.IGNORECASE)
_LATEST_RE = re.compile(
    r"\b(?:last|later|latest|younger|youngest|newer|newest|more recent|most recent)\b", re.IGNORECASE
)
_YEAR_RE = re.compile(r"\b(1\d{3}|20\d{2})\b")
CHOICE_SENTENCES = 3  # a page's year is read from its first sentences (born, formed, founded, published)
_DEFINING_RE = re.compile(r"\b(?:is|was|are|were)\s+(?:an?|the|one of the)\s+((?:[\w'’-]+[\s,]*){1,10})")


@dataclass(frozen=True)
class Choice:
    """The option a choice question picks, with the sentences giving each option's year."""

    sentences: list[Candidate]  # the picked option's sentence, then the other's
    option: str  # the picked option, the short answer


@dataclass(frozen=True)
class Verdict:
    """A yes/no verdict with the sentences it rests on."""

    sentences: list[Candidate]  # each compared thing's defining sentence
    verdict: str  # "Yes" / "No"


def choice(intent: QuestionIntent, docs: Sequence[SourceDoc]) -> Choice | None:
    """ "Which came first, A or B?", "Who is older, A or B?": each option's own page gives its year (its
    first sentences: born, formed, published); the earlier (or the later) leads, the other follows, and the
    short answer is the option. None when the question is no such choice or a year is missing."""
    earliest = _EARLIEST_RE.search(intent.text) is not None
    if not earliest and _LATEST_RE.search(intent.text) is None:
        return None
    left, sep, right = intent.text.rpartition(" or ")
    if not sep:
        return None
    before = [n for n in intent.names if n in left]
    after = [n for n in intent.names if n in right]
    if not before or not after:
        return None
    options = [before[-1], after[0]]
    dated = [_option_year(name, docs) for name in options]
    if any(d is None for d in dated):
        return None
    years = [year for year, _ in (d for d in dated if d is not None)]
    if years[0] == years[1]:
        return None
    pick = years.index(min(years) if earliest else max(years))
    sentences = [d[1] for d in (dated[pick], dated[1 - pick]) if d is not None]
    return Choice(sentences, options[pick])


def _option_year(name: str, docs: Sequence[SourceDoc]) -> tuple[int, Candidate] | None:
    """The first year on the option's own page (among its first sentences), with the sentence giving it."""
    key = normalize_key(name).removeprefix("the ")
    for doc in docs:
        if doc.title_key.removeprefix("the ") != key:
            continue  # the option's own page, not one whose title merely contains its name
        for c in doc.candidates[:CHOICE_SENTENCES]:
            year = _YEAR_RE.search(c.statement)
            if year is not None:
                return int(year.group(1)), c
    return None


# --- yes/no ---------------------------------------------------------------------------------------------


def yes_no(intent: QuestionIntent, docs: Sequence[SourceDoc], pool: list[Candidate]) -> Verdict | None:
    """Decide from each named thing's own page. "The same X": the value each page gives next to X (or its
    first capitalised descriptor) must agree. "Both ...": each page must state the question's remaining words."""
    subjects = _compared(intent, docs)
    evidence = [_defining_sentence(s, docs, pool) for s in subjects]
    found = [c for c in evidence if c is not None]
    if not found:
        return None
    subject_stems = frozenset().union(*(stem_set(s) for s in subjects)) if subjects else frozenset()
    predicate = frozenset(k for k in intent.weights if k not in subject_stems and k not in ("same", "both", "also"))
    same = re.search(r"\bsame\s+([a-z]+)", intent.text, re.IGNORECASE)
    if same and len(found) >= 2:
        values = [_attribute_value(same.group(1), c, subjects) for c in found]
        verdict = "Yes" if all(values) and len({v.casefold() for v in values if v}) == 1 else "No"
    elif len(found) < len(subjects):
        verdict = "No"
    else:
        verdict = _predicate_verdict(predicate, found)
    return Verdict(list(dict.fromkeys(found)), verdict)


def _compared(intent: QuestionIntent, docs: Sequence[SourceDoc]) -> list[str]:
    """The things compared: the question's names that have their own page, else its first two names."""
    with_page = [n for n in intent.names if any(_same_subject(n, d.title_key) for d in docs)]
    if len(with_page) >= 2:
        return with_page[:3]
    names = list(intent.names)
    if len(names) >= 2:
        return names[:2]
    body = re.sub(r"^(?:are|is|were|was|do|does|did|have|has|can)\s+(?:both\s+)?", "", intent.text, flags=re.I)
    parts = re.split(r"\s+and\s+", body.strip(" ?"), maxsplit=1)
    if len(parts) == 2:
        return [parts[0], " ".join(parts[1].split()[:3])]
    return names


def _same_subject(name: str, title_key: str) -> bool:
    key = normalize_key(name)
    return bool(key and title_key) and (key == title_key or (len(key) > 3 and (key in title_key or title_key in key)))


def _defining_sentence(subject: str, docs: Sequence[SourceDoc], pool: Sequence[Candidate]) -> Candidate | None:
    """The first sentence of the subject's own page, else the best sentence that names it."""
    for doc in docs:
        if _same_subject(subject, doc.title_key) and doc.candidates:
            return doc.candidates[0]
    key = normalize_key(subject)
    naming = [c for c in pool if key and key in normalize_key(c.statement)]
    return max(naming, key=lambda c: c.score) if naming else None


def _attribute_value(attribute: str, c: Candidate, subjects: Sequence[str]) -> str | None:
    """What a defining sentence says the compared attribute is: the capitalised words right next to the
    attribute's own word ("in X province"), else the first capitalised descriptor after "is a"."""
    own = {w.casefold() for s in subjects for w in s.split()}
    statement = c.statement
    near = re.search(
        rf"((?:[A-Z][\w'’-]+\s+){{1,3}}){re.escape(attribute)}\b|\b{re.escape(attribute)}\s+of\s+((?:[A-Z][\w'’-]+\s*){{1,3}})",
        statement,
        re.I,
    )
    if near:
        value = (near.group(1) or near.group(2) or "").strip()
        if value and value.casefold() not in own:
            return value
    match = _DEFINING_RE.search(statement)
    clause = match.group(1) if match else statement
    for word in re.findall(r"\b[A-Z][\w'’-]+", clause):
        if word.casefold() not in own:
            return str(word)
    return None


def _predicate_verdict(predicate: frozenset[str], found: Sequence[Candidate]) -> str:
    """Yes when every page states (nearly) all of the question's remaining words."""
    if not predicate:
        return "Yes"
    for c in found:
        have = c.stems | c.context
        if len(predicate & have) / len(predicate) < 0.75:
            return "No"
    return "Yes"


# --- yes/no from one deciding sentence (the answer reader's) --------------------------------------------

_NEGATION_RE = re.compile(
    r"\b(?:no|not|never|cannot|none|nothing|nobody|neither|nor|unable|forbidden|prohibited|refused"
    r"|wrong|incorrect|untrue)\b"
    r"|n[’']t\b",
    re.IGNORECASE,
)
_COMPARISON_RE = re.compile(r"\b(?:both|same|also|either)\b", re.IGNORECASE)


def is_comparison(intent: QuestionIntent, docs: Sequence[SourceDoc]) -> bool:
    """A yes/no question about two or more named things that each have a page of their own, or one that says
    "both", "the same", "also": decided from each thing's page (`yes_no`), not from one deciding sentence."""
    with_page = [n for n in intent.names if any(_same_subject(n, d.title_key) for d in docs)]
    return len(with_page) >= 2 or _COMPARISON_RE.search(intent.text) is not None


_NEGATIVE_OPENING_RE = re.compile(r"^\s*\w+n[’']t\b", re.IGNORECASE)  # "Isn't it free?" asks "Is it free?"


def is_negated(text: str) -> bool:
    """The text holds a negation ("no", "not", "never", "can't", "forbidden" ...)."""
    return _NEGATION_RE.search(text) is not None


def polarity_verdict(question: str, deciding: str) -> str:
    """ "No" when exactly one of the question and its deciding sentence is negated ("Is there a lift?" / "There is
    no lift"; "Is there no lift?" / "There is no lift" is "Yes"), else "Yes". A question opening with a negative
    auxiliary asks the positive one ("Isn't breakfast included?" / "Breakfast is included": "Yes")."""
    asked = _NEGATIVE_OPENING_RE.sub("", question)
    negated = (_NEGATION_RE.search(deciding) is not None) != (_NEGATION_RE.search(asked) is not None)
    return "No" if negated else "Yes"
