"""Answer-first selection: which source sentence answers the question, its short answer, and whether
the sources answer the question at all.

- The question is classified into an expected answer type (person, place, date, number, organization,
  thing, yes/no, how-to, definition, reason), its weighted terms (names weigh more) and, for how-to
  questions, its aspects.
- Every declarative sentence of every citable source is a candidate. `rank_candidates` gives each its
  ranker features and score (`ranker.py`: BM25, coverage, context, names, neighbours, proximity, answer
  type, source rank, title, opening, chain link and bridge; weights fitted by `eval/fit_ranker.py`) and its
  confidence that the sources answer the question.
- `select_answer`: the top sentence leads when its confidence clears the fitted threshold; otherwise the
  sources do not answer and the two best sentences are quoted as the closest. After the lead: the sentence
  it leans on (its chain link or the sentence its pronoun refers to), then other sentences the ranker gives
  at least a one-in-ten chance of holding the answer (`BODY_SHARE`).
- Rules kept beside the ranker (each measured with and without in docs/answer-selection.md): yes/no
  comparisons decided from each named thing's own page; how-to questions led by the best API's call
  signature; choice questions ("which came first, A or B?") by each option's year; a second hop (a lead that
  names another page of the pool leads on to that page's typed sentence); the short answer, the lead's best
  span by the fitted span ranker, given only when its fitted gate passes (`short_answers.py`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Literal

from research_tool.engines.base import NumberedSource
from research_tool.engines.text.entities import clean_title, find_mentions
from research_tool.engines.text.facts import clean_statement, is_declarative
from research_tool.engines.text.howto_queries import HOWTO_RE, actions, is_howto
from research_tool.engines.text.instructions import is_instruction_like
from research_tool.engines.text.keyphrases import query_words
from research_tool.engines.text.ranker import (
    Model,
    Sentence,
    SentenceSimilarity,
    encoded_candidates,
    features,
    load_model,
    matched,
    semantic_features,
)
from research_tool.engines.text.sentences import split_sentences
from research_tool.engines.text.short_answers import AskedFor, best_span, load_span_model
from research_tool.engines.text.slots import required_slots, which_slot
from research_tool.engines.text.tokens import QUESTION_WORDS, content_stems, is_stopword, stem, stem_set
from research_tool.models.entities import normalize_key

AnswerType = Literal[
    "person", "place", "date", "number", "organization", "thing", "yes_no", "howto", "definition", "reason"
]

MAX_SENTENCES_PER_SOURCE = 300
MAX_TYPED_CANDIDATES = 40
MIN_PREFIX = 5
SHARED_PREFIX = 8  # long words sharing this many letters are one word misspelt or inflected
MAX_ANSWER_SENTENCES = 4
MAX_ANSWER_WORDS = 75
CODE_BONUS = 0.25  # how-to: a sentence with a code-like span
NAME_WEIGHT = 1.5  # a question term inside a name weighs this much more
CONTEXT_SHARE = 0.5  # a question term found only in the title or antecedent counts this much
ANSWERED_MIN_COVERAGE = 0.5  # how-to: the chosen sentences cover this much of the question
MAX_SIGNATURE_CHARS = 400  # a longer "signature" line is no call signature

_PRONOUN_RE = re.compile(r"^(?:he|she|it|they|his|her|its|their)\b", re.IGNORECASE)
# "this notion", "these proteins", "such funding" (not "such as"): the sentence refers back to the one before
_DEMONSTRATIVE_RE = re.compile(r"^(?:this|these|such)\b|\b(?:this|these)\s+[a-z]|\bsuch\s+(?!as\b)[a-z]", re.IGNORECASE)
_SIGNATURE_RE = re.compile(r"^[ \t]*((?:class[ \t]+)?[A-Za-z_][\w.]*\([^\n]*\))[ \t]*$", re.MULTILINE)
_CODE_SPAN_RE = re.compile(
    r"`[^`\n]+`|\b[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+\b|\b\w+\(|\b[a-z_]+=|\b[A-Z][a-z]+(?:[A-Z][a-z0-9]+)+\b"
)
_ASPECT_SPLIT_RE = re.compile(r",\s*(?:and\s+)?|\s+and\s+(?:then\s+)?|\s+then\s+", re.IGNORECASE)
_WH_RE = re.compile(r"\b(?:which|what|who|whom|whose|when|where|how many|how much)\b", re.IGNORECASE)
_COMPARISON_RE = re.compile(r"\b(?:both|same|either|also|in common)\b", re.IGNORECASE)
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
     "minister", "governor", "senator", "judge", "general", "officer", "chancellor", "pope", "bishop"]
)  # fmt: skip
# words that name the answer's type, not its topic ("in what year", "how many people"): a sentence need not repeat them
_TYPE_WORDS: dict[str, frozenset[str]] = {
    "date": frozenset(["year", "date", "decade", "century", "month", "day", "time"]),
    "number": frozenset(["number", "many", "much", "amount"]),
    "person": frozenset(["name", "person"]),
    "place": frozenset(["place", "location"]),
    "thing": frozenset(["name"]),
}
_PREPOSITIONS = frozenset(
    ["into", "to", "from", "in", "on", "at", "with", "by", "for", "about", "after", "before", "under", "over",
     "out", "up", "off", "through", "during", "against", "upon"]
)  # fmt: skip
_PERIOD_RE = re.compile(
    r"\b\d{1,2}(?:st|nd|rd|th)[ -]century\b|\b(?:1\d|20)\d0s\b", re.IGNORECASE
)  # "the 19th century", "the 1960s": a time the name finder leaves out
_GENERIC_HOWTO = frozenset(["python", "way", "program", "code", "object", "thing"])
_DEFINING_RE = re.compile(r"\b(?:is|was|are|were)\s+(?:an?|the|one of the)\s+((?:[\w'’-]+[\s,]*){1,10})")


@dataclass(frozen=True)
class QuestionIntent:
    """What the question asks for."""

    text: str
    answer_type: AnswerType
    weights: dict[str, float]  # question content stem -> weight (names weigh more)
    names: tuple[str, ...]  # named things the question mentions (display form)
    name_stems: frozenset[str]
    aspects: tuple[frozenset[str], ...]  # how-to parts; one aspect (all terms) otherwise
    head_terms: frozenset[str] = frozenset()  # "which <head>": the head noun's stems
    head_noun: str | None = None  # its last word's stem ("which American show" -> "show"), when a noun
    comparison: bool = False

    @property
    def stems(self) -> frozenset[str]:
        return frozenset(self.weights)


def classify_question(question: str) -> QuestionIntent:
    """The question's expected answer type, weighted terms, named things and aspects."""
    text = " ".join(question.split())
    asked = _asked_sentence(text)
    slot = required_slots(asked)[0]
    wh = _WH_RE.search(asked)
    if slot.kind == "yes_no" and wh is not None:
        # "Do X, ..., released in which year?" opens like a yes/no question but asks for a value
        slot = required_slots(asked[wh.start() :])[0]
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
    elif kind == "entity" and frozenset(stem(t) for t in slot.terms) & _MEASURE_HEADS:
        answer_type = "number"  # "what temperature", "what percentage": a value
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
    for noun in _ARTICLE_NOUN_RE.findall(text):
        if noun.casefold() in QUESTION_WORDS and noun.casefold() not in _KIND_NOUNS:
            weights[stem(noun)] = 1.0  # "a list", "the show": a noun after an article is a topic, not a request
    name_stems: set[str] = set()
    for name in names:
        for key in content_stems(name):
            if answer_type == "howto" and key == "python":
                continue  # "in a Python program": the language, named or not, names no API
            weights[key] = NAME_WEIGHT
            name_stems.add(key)
    aspects = _aspects(text, weights) if answer_type == "howto" else (frozenset(weights),)
    return QuestionIntent(
        text=text,
        answer_type=answer_type,
        weights=weights,
        names=names,
        name_stems=frozenset(name_stems),
        aspects=aspects,
        head_terms=head_terms,
        head_noun=_head_noun(text, slot.terms),
        comparison=answer_type == "yes_no" and bool(_COMPARISON_RE.search(text)),
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


_ARTICLE_NOUN_RE = re.compile(r"\b(?:a|an|the)\s+(\w+)", re.IGNORECASE)
_KIND_NOUNS = frozenset(["name", "kind", "type", "sort"])
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
    if head in _PREPOSITIONS or (after is not None and after.group(2).casefold() in _PREPOSITIONS):
        return None
    return stem(head)


def _inner(name: str) -> bool:
    return len(name.split()) >= 2


def _aspects(text: str, weights: dict[str, float]) -> tuple[frozenset[str], ...]:
    """The parts of a how-to question: "run X with a timeout and capture its output" -> two aspects."""
    body = HOWTO_RE.sub("", text).strip(" ?.")
    parts = [
        frozenset(s for s in stem_set(p) if s in weights and s not in _GENERIC_HOWTO)
        for p in _ASPECT_SPLIT_RE.split(body)
    ]
    parts = [p for p in parts if p]
    return tuple(parts) or (frozenset(weights),)


# --- candidates ---------------------------------------------------------------------------------------


@dataclass(eq=False)
class Candidate:
    n: int  # source number
    url: str
    statement: str  # display form (clean)
    index: int  # position in its document
    stems: frozenset[str]
    context: frozenset[str]  # title and antecedent stems
    antecedent: Candidate | None = None  # the previous sentence when this one opens with a pronoun
    score: float = 0.0
    coverage: float = 0.0
    confidence: float = 0.0  # the confidence model's probability that the sources answer, with this as lead
    share: float = 0.0  # the ranker's probability (softmax over the pool) that this sentence holds the answer
    features: dict[str, float] = field(default_factory=dict)
    terms: tuple[str, ...] = ()  # stemmed content words in order
    filler: str | None = None
    link: Candidate | None = None  # the sentence that named this one's page (second hop)
    bridge: bool = False  # this sentence names another page of the pool
    names_new: bool = False  # it names something the question does not
    signature: bool = False

    @property
    def joint(self) -> frozenset[str]:
        """Its words with its antecedent's: "She served as ..." is judged with the sentence naming her."""
        return self.stems | self.antecedent.stems if self.antecedent is not None else self.stems


@dataclass
class SourceDoc:
    n: int
    url: str
    title: str
    title_key: str
    title_stems: frozenset[str]
    candidates: list[Candidate]
    signature: Candidate | None


def build_candidates(sources: Sequence[NumberedSource]) -> list[SourceDoc]:
    """Every declarative sentence of every citable source (and a how-to page's call signature)."""
    docs: list[SourceDoc] = []
    for numbered in sources:
        source = numbered.source
        text = source.text()
        title = clean_title(source.title or "")
        title_stems = stem_set(title) | _acronyms(title)
        candidates: list[Candidate] = []
        previous: Candidate | None = None
        for sentence in split_sentences(text)[:MAX_SENTENCES_PER_SOURCE]:
            if not is_declarative(sentence.text) or is_instruction_like(sentence.text):
                previous = None
                continue
            # quoted word for word (whitespace aside) unless footnote markers must go
            raw = " ".join(sentence.text.split())
            statement = clean_statement(sentence.text) if "[" in raw else raw
            stems = frozenset(content_stems(statement))
            context = title_stems
            if previous is not None and _DEMONSTRATIVE_RE.search(statement):
                # "Economist X challenges this notion": what the notion is, the sentence before says; its words
                # count as context (CONTEXT_SHARE), not as the sentence's own
                context = title_stems | previous.stems
            antecedent = None
            if _PRONOUN_RE.match(statement) and previous is not None:
                antecedent = previous  # judged (and quoted) together with the sentence it refers to
            candidate = Candidate(numbered.n, source.url, statement, sentence.index, stems, context, antecedent)
            candidate.terms = tuple(content_stems(statement))
            candidates.append(candidate)
            previous = candidate
        signature = None
        match = next((m for m in _SIGNATURE_RE.finditer(text[:3000]) if _one_call(m.group(1))), None)
        if match and len(match.group(1)) <= MAX_SIGNATURE_CHARS:
            line = match.group(1).strip()
            signature = Candidate(
                numbered.n, source.url, line, -1, frozenset(content_stems(line)), title_stems, signature=True
            )
        docs.append(SourceDoc(numbered.n, source.url, title, normalize_key(title), title_stems, candidates, signature))
    return docs


def _one_call(line: str) -> bool:
    """A call signature is one call: the parenthesis after the name closes at the line's end ("f(a, g(b))"),
    not a diagram or an expression that merely starts and ends with calls ("read() | ( putheader() )* end()")."""
    depth = 0
    closed_at = -1
    for i, char in enumerate(line):
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth == 0:
                closed_at = i
                break
    return closed_at == len(line.rstrip()) - 1


def _acronyms(title: str) -> frozenset[str]:
    """The initials of a title's capitalised words ("Intergovernmental Panel on Climate Change" -> "ipcc"):
    a question may name the page's subject by its abbreviation."""
    initials = "".join(w[0] for w in title.split() if w[:1].isupper()).casefold()
    return frozenset([initials]) if len(initials) >= 2 else frozenset()


# --- scoring --------------------------------------------------------------------------------------------


def _idf_weights(intent: QuestionIntent, pool: Sequence[Candidate]) -> dict[str, float]:
    n = len(pool)
    weights = {}
    for key, base in intent.weights.items():
        df = sum(1 for c in pool if key in c.stems)
        weights[key] = base * (math.log((n + 1) / (1 + df)) + 1.0)
    return weights


def _coverage(stems: frozenset[str], context: frozenset[str], weights: dict[str, float]) -> float:
    total = sum(weights.values())
    if not total:
        return 0.0
    own = matched(weights, stems)
    around = matched((k for k in weights if k not in own), context)
    hit = sum(weights[k] for k in own) + CONTEXT_SHARE * sum(weights[k] for k in around)
    return hit / total


def type_filler(intent: QuestionIntent, statement: str) -> str | None:
    """A value of the expected answer type in `statement` that the question does not already name."""
    kind = intent.answer_type
    mentions = [m for m in find_mentions(statement) if not _named_in_question(m.text, intent)]
    if kind == "date":
        found = next((m.text for m in mentions if m.entity_type == "date"), None)
        period = _PERIOD_RE.search(statement)
        return found or (period.group(0) if period and period.group(0) not in intent.text else None)
    if kind == "number":
        found = next((m.text for m in mentions if m.entity_type == "number"), None)
        dates = [(m.start, m.start + len(m.text)) for m in mentions if m.entity_type == "date"]
        return found or next(
            (
                w.group(0)
                for w in re.finditer(r"\d[\d,.]*", statement)
                if w.group(0).rstrip(".,") not in intent.text
                and not any(a <= w.start() < b for a, b in dates)  # the day of "2 May 1936" counts nothing
            ),
            None,
        )
    if kind == "person":
        person = next((m.text for m in mentions if m.entity_type == "person"), None)
        return person or next((m.text for m in mentions if m.entity_type in ("other", "organization")), None)
    if kind == "place":
        place = next((m.text for m in mentions if m.entity_type == "place"), None)
        return place or next((m.text for m in mentions if m.entity_type == "other"), None)
    if kind == "organization":
        org = next((m.text for m in mentions if m.entity_type == "organization"), None)
        return org or next((m.text for m in mentions if m.entity_type == "other"), None)
    if kind == "howto":
        spans = [m.group(0) for m in _CODE_SPAN_RE.finditer(statement)]
        return spans[0].strip("`") if spans else None
    return None


def _named_in_question(text: str, intent: QuestionIntent) -> bool:
    stems = stem_set(text)
    return bool(stems) and stems <= intent.stems


def rank_candidates(
    intent: QuestionIntent,
    docs: Sequence[SourceDoc],
    model: Model | None = None,
    similarity: SentenceSimilarity | None = None,
) -> list[Candidate]:
    """Every candidate with its ranker features, score and confidence (see `ranker`); with a `similarity`,
    the semantic features too, scored by the lexical+semantic weight set."""
    model = model or load_model(semantic=similarity is not None)
    pool = [c for d in docs for c in d.candidates]
    if not pool:
        return pool
    weights = _idf_weights(intent, pool)
    for c in pool:
        c.coverage = _coverage(c.joint, c.context, weights)
    # typing a sentence (finding its names) is the costly part: only the plausible ones are typed
    for c in sorted(pool, key=lambda c: -c.coverage)[:MAX_TYPED_CANDIDATES]:
        c.filler = type_filler(intent, c.statement)
        c.names_new = any(not _named_in_question(m.text, intent) for m in find_mentions(c.statement))
    _link(intent, docs, pool)
    total = max(1, len(docs))
    sentences = []
    for doc in docs:
        for k, c in enumerate(doc.candidates):
            before = doc.candidates[k - 1].stems if k > 0 else frozenset()
            after = doc.candidates[k + 1].stems if k + 1 < len(doc.candidates) else frozenset()
            sentences.append(
                Sentence(
                    terms=c.terms,
                    context=c.context | (c.antecedent.stems if c.antecedent is not None else frozenset()),
                    neighbours=before | after,
                    title=doc.title_stems,
                    source_rank=1.0 - (c.n - 1) / total,
                    opening=c.index == 0,
                    typed=None if c.filler is None else "value" if intent.answer_type in _VALUE_TYPES else "name",
                    bridge=c.bridge,
                    link=c.link.joint | c.link.context if c.link is not None else frozenset(),
                )
            )
    values = features(intent.text, intent.weights, intent.name_stems, sentences)
    if similarity is not None:
        lexical = load_model()
        chosen = encoded_candidates([lexical.score(f) for f in values])
        cosines = similarity(intent.text, [pool[i].statement for i in chosen])
        for f, extra in zip(values, semantic_features(dict(zip(chosen, cosines, strict=True)), len(pool)), strict=True):
            f.update(extra)
    for c, f in zip(pool, values, strict=True):
        c.features = f
        c.score = model.score(f)
        c.confidence = model.confidence(f, c.score)
    top = max(c.score for c in pool)
    mass = sum(math.exp(c.score - top) for c in pool)
    for c in pool:
        c.share = math.exp(c.score - top) / mass
    return pool


def _link(intent: QuestionIntent, docs: Sequence[SourceDoc], pool: list[Candidate]) -> None:
    """Second hop: a page that a good sentence of another page names (by its title) is linked to that
    sentence; its own sentences may then answer what the link only leads to."""
    best_links = sorted(pool, key=lambda c: -c.coverage)[:12]
    titles = {d.n: d.title_key for d in docs}
    question_key = normalize_key(intent.text)
    for doc in docs:
        if len(doc.title_key) < 4 or doc.title_key in question_key:
            continue
        linking = [
            c
            for c in best_links
            if c.n != doc.n and titles.get(c.n) != doc.title_key and doc.title_key in normalize_key(c.statement)
        ]
        if linking:
            link = max(linking, key=lambda c: c.coverage)
            link.bridge = True
            for c in doc.candidates:
                c.link = link


# --- selection ----------------------------------------------------------------------------------------

BODY_SHARE = 0.1  # after the lead: sentences the ranker gives at least a one-in-ten chance of holding the answer
RULES: frozenset[str] = frozenset(
    ["yes_no", "howto_lead", "choice", "second_hop", "support", "short_answer", "body_floor"]
)


@dataclass
class AnswerSelection:
    sentences: list[Candidate]  # in answer order
    short_answer: str | None
    answered: bool
    verdict: str | None = None  # "Yes" / "No" for a yes/no question
    closest: list[Candidate] = field(default_factory=list)  # what was found, when not answered
    span: str | None = None  # the lead's best span, given as `short_answer` only when the fitted gate passes it


def select_answer(
    question: str,
    sources: Sequence[NumberedSource],
    *,
    model: Model | None = None,
    rules: frozenset[str] = RULES,
    similarity: SentenceSimilarity | None = None,
) -> AnswerSelection:
    """The ranker's best sentence leads when its confidence clears the fitted threshold; `rules` names the
    special cases kept beside it (each measured with and without in docs/answer-selection.md). `similarity`
    (the `semantic` extra's sentence encoder, when the caller has it) adds the semantic features and selects
    the weight set fitted with them."""
    model = model or load_model(semantic=similarity is not None)
    intent = classify_question(question)
    docs = build_candidates(sources)
    pool = rank_candidates(intent, docs, model, similarity)
    if not pool and not any(d.signature for d in docs):
        return AnswerSelection([], None, False)
    if intent.answer_type == "yes_no" and "yes_no" in rules:
        return _yes_no(intent, docs, pool)
    if intent.answer_type == "howto" and "howto_lead" in rules:
        return _howto(intent, docs, pool)
    choice = _choice(intent, docs) if "choice" in rules else None
    if choice is not None:
        return choice
    ranked = sorted(pool, key=lambda c: (-c.score, c.n, c.index))
    if not ranked:
        return AnswerSelection([], None, False)
    lead = ranked[0]
    if lead.confidence < model.answered_at or not _states_the_compared(intent, lead):
        closest = list({c.statement: c for c in reversed(ranked[:4])}.values())[::-1][:2]  # one of each
        return AnswerSelection([], None, False, closest=closest)
    hop = _second_hop(lead, pool, {d.n: d.title_key for d in docs}) if "second_hop" in rules else None
    if hop is not None:
        lead = hop
    chosen = _with_support(lead) if "support" in rules else [lead]
    floor = BODY_SHARE if "body_floor" in rules else 0.0
    for c in ranked[1:]:
        if len(chosen) >= MAX_ANSWER_SENTENCES - 1 or _words(chosen) >= MAX_ANSWER_WORDS - 25:
            break
        if c.share < floor:
            break  # the rest are unlikely to hold the answer: they bear too little on the question
        if c in chosen or _similar(c, chosen):
            continue
        chosen.append(c)
    found = best_span(asked_for(intent), lead.statement, lead.share, lead.confidence)
    span = found.text if found is not None else None
    precise = found is not None and found.probability >= load_span_model().threshold
    return AnswerSelection(chosen, span if "short_answer" in rules and precise else None, True, span=span)


def asked_for(intent: QuestionIntent) -> AskedFor:
    """What the span ranker needs of the question intent (`short_answers`)."""
    return AskedFor(intent.answer_type, intent.weights, intent.head_noun, intent.text)


_DIFFERENCE_RE = re.compile(r"\bdifference\s+between\s+(.+?)\s+and\s+(.+?)\s*\??$", re.IGNORECASE)


def _states_the_compared(intent: QuestionIntent, lead: Candidate) -> bool:
    """ "What is the difference between A and B?": a lead answers only when it names both A and B itself (a
    sentence about one of them, or about "differences" in general, is of the wrong kind)."""
    match = _DIFFERENCE_RE.search(intent.text)
    if match is None:
        return True
    own = frozenset(lead.terms)
    return all(matched(stem_set(side), own) == stem_set(side) for side in match.groups() if stem_set(side))


def _second_hop(lead: Candidate, pool: Sequence[Candidate], titles: dict[int, str]) -> Candidate | None:
    """A lead that names another page of the pool (a bridge) leads on to it: that page's best sentence
    carrying a value of the asked type, or a name the question does not give, answers instead. A lead whose
    only value of the asked type is its own page's subject (the thing the question describes, not what it
    asks of it) leads on within its page, or to a page its page names: the best sentence there carrying a
    value of the asked type that is neither page's subject."""
    if lead.bridge:
        far = [c for c in pool if c.link is lead and (c.filler is not None or c.names_new)]
        return max(far, key=lambda c: c.score, default=None)
    if lead.filler is None or not _is_subject(lead.filler, titles.get(lead.n, "")):
        return None
    near = [
        c
        for c in pool
        if c is not lead
        and (c.n == lead.n or (c.link is not None and c.link.n == lead.n))
        and c.filler is not None
        and not _is_subject(c.filler, titles.get(c.n, ""))
        and not _is_subject(c.filler, titles.get(lead.n, ""))
    ]
    return max(near, key=lambda c: c.score, default=None)


def _is_subject(filler: str, title_key: str) -> bool:
    key = normalize_key(filler)
    return bool(key) and bool(title_key) and (key == title_key or key in title_key or title_key in key)


def _with_support(lead: Candidate) -> list[Candidate]:
    """The lead, then what it leans on: the sentence that named its page (a second hop), or the sentence
    its opening pronoun refers to."""
    chosen = [lead]
    if lead.link is not None and lead.features.get("link", 0.0) > 0 and lead.coverage < lead.link.coverage:
        chosen.append(lead.link)  # the sentence that named the lead's page
    elif lead.antecedent is not None:
        chosen.append(lead.antecedent)
    return chosen


def _words(chosen: Sequence[Candidate]) -> int:
    return sum(len(c.statement.split()) for c in chosen)


def _similar(c: Candidate, chosen: Sequence[Candidate]) -> bool:
    return any(len(c.stems & o.stems) / max(1, len(c.stems | o.stems)) >= 0.5 for o in chosen)


# --- value types (read by the question intent and the ranker) -------------------------------------------

_MEASURE_HEADS = frozenset(
    stem(w) for w in ["percentage", "percent", "proportion", "share", "rate", "amount", "population", "cost",
                      "price", "fee", "temperature", "distance", "length", "height", "weight", "size", "age"]
)  # fmt: skip
_VALUE_TYPES = frozenset(["date", "number"])


# --- how-to ---------------------------------------------------------------------------------------------

MIN_IDENTIFIER_PART = 3  # "csv", "log", "dict": shorter parts ("re", "os") match nothing on their own
API_TITLE_MIN_MATCH = 0.5  # an API page without facts is admitted when its name covers this much of the question
ACTION_NAME_BONUS = 0.3  # how-to: an API whose own name (its last part) is the action the question asks for
_API_NAME_RE = re.compile(r"^\s*([A-Za-z_][\w]*(?:\.[A-Za-z_]\w*)+|[A-Za-z_]\w*\()")


def identifier_matched(terms: Iterable[str], identifier: str) -> frozenset[str]:
    """The question terms an API name spells out: its dotted and camel-case parts match a term they
    abbreviate or contain ("dict" ~ "dictionary", "reader" ~ "read", "fromisoformat" ~ "iso"), besides the
    usual stem match."""
    parts = stem_set(identifier)
    pieces = {p for p in parts if len(p) >= MIN_IDENTIFIER_PART and "." not in p}
    terms = list(terms)
    out = set(matched(terms, parts))
    for term in terms:
        if len(term) >= MIN_IDENTIFIER_PART and any(term.startswith(p) or term in p for p in pieces):
            out.add(term)
    return frozenset(out)


def api_name(title: str) -> str | None:
    """The code identifier a page's title names ("csv.DictReader — ..." -> "csv.DictReader"), if any."""
    match = _API_NAME_RE.match(title)
    return match.group(1).rstrip("(") if match else None


@lru_cache(maxsize=64)
def _cached_intent(question: str) -> QuestionIntent:
    return classify_question(question)


def api_title_match(question: str, title: str) -> float:
    """For a how-to question: the weighted share of the question's terms that an API page's name spells
    out (0 for any other question, or a title that names no API)."""
    name = api_name(title)
    if name is None:
        return 0.0
    intent = _cached_intent(question)
    if intent.answer_type != "howto" or name is None or not intent.weights:
        return 0.0
    found = identifier_matched(intent.weights, name)
    return sum(intent.weights[k] for k in found) / sum(intent.weights.values())


def action_name_bonus(intent: QuestionIntent, name: str, said: frozenset[str]) -> float:
    """How-to: a bonus for an API named for the question's action ("split a command string" -> `shlex.split`,
    "write rows to a CSV file" -> `csv.writer`), judged on the name's last part, the function itself, when
    its page (`said`: its name's and sentences' stems) also names something the action is done to."""
    verbs = {stem(v) for v in actions(intent.text)}
    last = name.rsplit(".", 1)[-1]
    if not verbs or not identifier_matched(verbs, last) or not _names_the_act(verbs, last):
        return 0.0
    objects = [k for k in intent.weights if k not in verbs]
    return ACTION_NAME_BONUS if matched(objects, said) or identifier_matched(objects, name) else 0.0


def _names_the_act(verbs: Iterable[str], last: str) -> bool:
    """A part of the name opens with the action ("cancel", "split", "writer"), and is no state or progress
    of it: `cancelled()` and `cancelling()` ask about the act, `uncancel()` undoes it."""
    pieces = [p for p in re.split(r"_|(?<=[a-z])(?=[A-Z])", last) if p]
    return any(
        piece.casefold().startswith(v) and not piece.casefold().endswith(("ed", "ing"))
        for v in verbs
        for piece in pieces
    )


def _howto(intent: QuestionIntent, docs: Sequence[SourceDoc], pool: list[Candidate]) -> AnswerSelection:
    """Lead with the call signature of the page that best covers the question, then one sentence per aspect."""
    weights = _idf_weights(intent, pool)

    def doc_score(doc: SourceDoc) -> float:
        best = max((c.coverage for c in doc.candidates), default=0.0)
        name = api_name(doc.title)
        if name is None:
            title = _coverage(
                stem_set(doc.title) | (doc.signature.stems if doc.signature else frozenset()), frozenset(), weights
            )
            return best + title
        # an API page answers through its name or through its prose (its title's summary is prose too):
        # a page holding only a signature and a member list, whose name spells the question out, competes
        # with one that explains more but whose name says less
        named = identifier_matched(weights, name)
        if doc.signature is not None:  # its parameters name what it does too ("default_factory")
            named |= matched(weights, doc.signature.stems)
        title = sum(weights[k] for k in named) / max(1e-9, sum(weights.values()))
        said = frozenset().union(*(c.stems for c in doc.candidates))
        return max(best, title) + action_name_bonus(intent, name, said)

    with_signature = [d for d in docs if d.signature is not None]
    chosen: list[Candidate] = []
    lead_doc = max(with_signature, key=doc_score) if with_signature else None
    if lead_doc is not None and lead_doc.signature is not None and doc_score(lead_doc) >= 0.3:
        chosen.append(lead_doc.signature)
    # by prose sentences (a signature names parameters; it explains nothing), and by the leading API's own
    # name: the next sentence need not say again what the name says (`log_message` for "log messages")
    covered: set[str] = set(_said_by_name(intent, chosen[0], lead_doc)) if chosen else set()
    pending = [set(a) for a in intent.aspects]
    while pending and len(chosen) < MAX_ANSWER_SENTENCES:
        # the next unfilled aspect: what no chosen prose sentence has covered yet
        aspect = frozenset(pending[0] - matched(pending[0], frozenset(covered)))
        if not aspect:
            pending.pop(0)
            continue
        aspect_weights = {k: weights.get(k, 1.0) for k in aspect}
        best = max(
            (c for c in pool if c not in chosen),
            key=lambda c: (
                _coverage(c.stems, c.context, aspect_weights)
                + (CODE_BONUS if c.filler else 0.0)
                + 0.5 * c.confidence
                + (0.15 if lead_doc is not None and c.n == lead_doc.n else 0.0)
            ),
            default=None,
        )
        if best is None or _coverage(best.stems, best.context, aspect_weights) <= 0:
            pending.pop(0)  # nothing more in the sources for this aspect
            continue
        chosen.append(best)
        covered |= best.stems
    if len(chosen) == 1 and chosen[0].signature and lead_doc is not None:
        # its name said it all: the page's own best sentence explains the call
        own = max((c for c in pool if c.n == lead_doc.n and not c.signature), key=lambda c: c.score, default=None)
        chosen += [own] if own is not None else []
    if not chosen:
        ranked = sorted(pool, key=lambda c: -c.score)
        return AnswerSelection([], None, False, closest=ranked[:2])
    api = _api_name(chosen[0], lead_doc, intent)
    for c in chosen:
        covered |= c.stems | c.context  # a page's title (the API's name) is part of what it says
    found = matched(intent.weights, frozenset(covered))
    for c in chosen:
        name = api_name(c.statement) if c.signature else None
        found |= identifier_matched(intent.weights, name) if name else frozenset()
    answered = sum(intent.weights[k] for k in found) / max(1e-9, sum(intent.weights.values())) >= ANSWERED_MIN_COVERAGE
    if not answered:
        return AnswerSelection([], None, False, closest=chosen[:2])
    return AnswerSelection(chosen, api, True)


def _said_by_name(intent: QuestionIntent, lead: Candidate, doc: SourceDoc | None) -> frozenset[str]:
    """The question terms the leading API's name spells ("logkit.log_message" -> log, message)."""
    name = api_name(doc.title) if lead.signature and doc is not None else None
    return identifier_matched(intent.weights, name) if name else frozenset()


def _api_name(lead: Candidate, doc: SourceDoc | None, intent: QuestionIntent | None = None) -> str | None:
    """The API call: a signature shortened to its name and the parameters the question asks about."""
    if lead.signature:
        name, _, params = lead.statement.partition("(")
        asked = [
            p.split("=")[0].strip(" *")
            for p in params.rstrip(")").split(",")
            if intent is not None and stem_set(p.split("=")[0].replace("_", " ")) & intent.stems
        ]
        return f"{name.removeprefix('class ').strip()}({', '.join(f'{a}=...' for a in asked[:2]) or '...'})"
    spans = [m.group(0).strip("`(") for m in _CODE_SPAN_RE.finditer(lead.statement)]
    return spans[0] if spans else (doc.title if doc else None)


# --- choices ("which came first, A or B?") -----------------------------------------------------------

_EARLIEST_RE = re.compile(r"\b(?:first|earlier|earliest|older|oldest|before|sooner)\b", re.IGNORECASE)
_LATEST_RE = re.compile(
    r"\b(?:last|later|latest|younger|youngest|newer|newest|more recent|most recent)\b", re.IGNORECASE
)
_YEAR_RE = re.compile(r"\b(1\d{3}|20\d{2})\b")
CHOICE_SENTENCES = 3  # a page's year is read from its first sentences (born, formed, founded, published)


def _choice(intent: QuestionIntent, docs: Sequence[SourceDoc]) -> AnswerSelection | None:
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
    return AnswerSelection(sentences, options[pick], True, span=options[pick])


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


def _yes_no(intent: QuestionIntent, docs: Sequence[SourceDoc], pool: list[Candidate]) -> AnswerSelection:
    """Decide from each named thing's own page. "The same X": the value each page gives next to X (or its
    first capitalised descriptor) must agree. "Both ...": each page must state the question's remaining words."""
    subjects = _compared(intent, docs)
    evidence = [_defining_sentence(s, docs, pool) for s in subjects]
    found = [c for c in evidence if c is not None]
    if not found:
        ranked = sorted(pool, key=lambda c: -c.score)
        return AnswerSelection([], None, False, closest=ranked[:2])
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
    chosen = list(dict.fromkeys(found))[: MAX_ANSWER_SENTENCES - 1]
    return AnswerSelection(chosen, verdict.casefold(), True, verdict=verdict)


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
