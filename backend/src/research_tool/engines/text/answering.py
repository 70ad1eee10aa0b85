"""Answer-first selection: which source sentence answers the question, its short answer, and whether
the sources answer the question at all.

- The question is classified into an expected answer type (person, place, date, number, organization,
  thing, yes/no, how-to, definition, reason) and its weighted terms, names weighing more
  (`question_intent.py`).
- Every declarative sentence of every citable source is a candidate. `rank_candidates` gives each its
  ranker features and score (`ranker.py`: BM25, coverage, context, names, neighbours, proximity, answer
  type, source rank, title, opening, chain link and bridge; weights fitted by `eval/fit_ranker.py`) and its
  confidence that the sources answer the question.
- `select_answer`: the top sentence leads when its confidence clears the fitted threshold; otherwise the
  sources do not answer and the two best sentences are quoted as the closest. After the lead: the sentence
  that named its page when it came by a second hop (`support`), then other sentences the ranker gives at
  least a one-in-ten chance of holding the answer (`BODY_SHARE`), four sentences at most.
- Rules kept beside the ranker (each measured with and without in docs/answer-selection.md): yes/no
  comparisons decided from each named thing's own page and choice questions ("which came first, A or B?")
  by each option's year (`verdicts.py`); how-to questions led by the best API's call signature
  (`howto_answers.py`); a second hop (a lead that names another page of the pool leads on to that page's
  typed sentence); "the difference between A and B" answered only by a lead naming both; the short answer,
  a span of the lead given only when the lead carries a value of the asked type.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import pairwise

from research_tool.engines.base import NumberedSource
from research_tool.engines.text.entities import clean_title, find_mentions
from research_tool.engines.text.facts import clean_statement, is_declarative
from research_tool.engines.text.howto_answers import API_TITLE_MIN_MATCH as API_TITLE_MIN_MATCH
from research_tool.engines.text.howto_answers import CODE_SPAN_RE as _CODE_SPAN_RE
from research_tool.engines.text.howto_answers import action_name_bonus as action_name_bonus
from research_tool.engines.text.howto_answers import api_title_match as api_title_match
from research_tool.engines.text.howto_answers import howto_answer
from research_tool.engines.text.howto_answers import identifier_matched as identifier_matched
from research_tool.engines.text.instructions import is_instruction_like
from research_tool.engines.text.question_intent import PREPOSITIONS as _PREPOSITIONS
from research_tool.engines.text.question_intent import QuestionIntent
from research_tool.engines.text.question_intent import classify_question as classify_question
from research_tool.engines.text.question_intent import coverage as _coverage
from research_tool.engines.text.question_intent import idf_weights as _idf_weights
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
from research_tool.engines.text.tokens import content_stems, is_stopword, stem, stem_set
from research_tool.engines.text.verdicts import choice, yes_no
from research_tool.models.entities import normalize_key

MAX_SENTENCES_PER_SOURCE = 300
MAX_TYPED_CANDIDATES = 40
MAX_ANSWER_SENTENCES = 4
SHORT_ANSWER_WORDS = 8
SHORT_NAMED_BONUS = 0.6  # a short-answer span with a name or a number in it
SHORT_COMMON_PENALTY = 0.5  # a short-answer span of one common word
SHORT_HEAD_BONUS = 0.5  # a short-answer span right beside the question's head noun ("which toxin")
SHORT_HEAD_PHRASE_BONUS = 2.0  # the words before the question's head noun, with it ("a progressive tax system")
SHORT_SLOT_BONUS = 1.0  # a span right after the question's word before its wh-word ("... become what?")
MAX_SIGNATURE_CHARS = 400  # a longer "signature" line is no call signature

_PRONOUN_RE = re.compile(r"^(?:he|she|it|they|his|her|its|their)\b", re.IGNORECASE)
# "this notion", "these proteins", "such funding" (not "such as"): the sentence refers back to the one before
_DEMONSTRATIVE_RE = re.compile(r"^(?:this|these|such)\b|\b(?:this|these)\s+[a-z]|\bsuch\s+(?!as\b)[a-z]", re.IGNORECASE)
_WH_RE = re.compile(r"\b(?:which|what|who|whom|whose|when|where|how many|how much)\b", re.IGNORECASE)
# a call signature alone on its line, or opening a module summary's line ("urlopen(url, data=None) -- Basic usage")
_SIGNATURE_RE = re.compile(
    r"^[ \t]*((?:class[ \t]+)?[A-Za-z_][\w.]*\([^\n]*?\))(?:[ \t]+--[ \t][^\n]*)?[ \t]*$", re.MULTILINE
)
_PERIOD_RE = re.compile(
    r"\b\d{1,2}(?:st|nd|rd|th)[ -]century\b|\b(?:1\d|20)\d0s\b", re.IGNORECASE
)  # "the 19th century", "the 1960s": a time the name finder leaves out


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

SHORT_SHARE = 0.5  # a short answer only from a lead the ranker gives at least even odds (precise or null)
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
    span: str | None = None  # the lead's best span, given as `short_answer` only when of the asked type


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
        verdict = yes_no(intent, docs, pool)
        if verdict is None:
            return AnswerSelection([], None, False, closest=sorted(pool, key=lambda c: -c.score)[:2])
        said = verdict.verdict
        return AnswerSelection(verdict.sentences[: MAX_ANSWER_SENTENCES - 1], said.casefold(), True, verdict=said)
    if intent.answer_type == "howto" and "howto_lead" in rules:
        floor = BODY_SHARE if "body_floor" in rules else 0.0
        howto = howto_answer(intent, docs, pool, MAX_ANSWER_SENTENCES, floor)
        if not howto.answered:
            closest = howto.sentences or sorted(pool, key=lambda c: -c.score)[:2]
            return AnswerSelection([], None, False, closest=closest)
        return AnswerSelection(howto.sentences, howto.api, True)
    picked = choice(intent, docs) if "choice" in rules else None
    if picked is not None:
        return AnswerSelection(picked.sentences, picked.option, True, span=picked.option)
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
        if len(chosen) >= MAX_ANSWER_SENTENCES - 1:
            break
        if c.share < floor:
            break  # the rest are unlikely to hold the answer: they bear too little on the question
        if c in chosen:
            continue
        chosen.append(c)
    span = short_answer(intent, lead)
    precise = lead.filler is not None and lead.share >= SHORT_SHARE and _complete_span(span, intent.answer_type)
    short = span if "short_answer" in rules and precise else None
    return AnswerSelection(chosen, short, True, span=span)


_SPAN_JOINERS = frozenset(["of", "and", "the", "de", "von", "van", "du", "la", "le", "da", "del", "der", "&"])
_SPAN_OPENERS = frozenset(
    ["in", "under", "at", "on", "by", "from", "with", "for", "after", "before", "during", "near", "to"]
)
_COUNT_WORD_RE = re.compile(
    r"(?:two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|dozens?|hundreds?)", re.IGNORECASE
)
_NUMBER_WORD_RE = re.compile(
    r"\d|\b(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|hundred|thousand|million|billion|dozen)\b",
    re.IGNORECASE,
)


def _complete_span(span: str | None, answer_type: str) -> bool:
    """A span of the asked type and whole: a date or number holds a figure or number word; a name is
    capitalised words (joined by "of", "and", "de" ...), not a clause fragment, a phrase opened by a
    preposition or a possessive."""
    words = (span or "").split()
    if not words:
        return False
    if answer_type in _VALUE_TYPES:
        return bool(_NUMBER_WORD_RE.search(span or ""))
    if answer_type in _LOOSE_TYPES:
        return (
            words[0][:1].isupper()
            and words[0].casefold() not in _SPAN_OPENERS  # "In Europe", "Under the old charter": a clause's start
            and words[-1][:1].isupper()
            and not words[-1].endswith(("'s", "’s"))
            and all(w[:1].isupper() or w.casefold() in _SPAN_JOINERS or not w[:1].isalpha() for w in words)
        )
    return True


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
    """The lead, then the sentence that named its page when it came by a second hop and states less of the
    question than that sentence."""
    chosen = [lead]
    if lead.link is not None and lead.features.get("link", 0.0) > 0 and lead.coverage < lead.link.coverage:
        chosen.append(lead.link)
    return chosen


# --- short answers ---------------------------------------------------------------------------------------


_EXPECTED_MENTIONS: dict[str, tuple[str, ...]] = {
    "date": ("date",),
    "number": ("number",),
    "person": ("person",),
    "place": ("place",),
    "organization": ("organization",),
}
_MEASURE_HEADS = frozenset(
    stem(w) for w in ["percentage", "percent", "proportion", "share", "rate", "amount", "population", "cost",
                      "price", "fee", "temperature", "distance", "length", "height", "weight", "size", "age"]
)  # fmt: skip
_QUOTED_RE = re.compile(r"[\"“]([^\"“”]{1,60})[\"”]")
_WHAT_HEAD_RE = re.compile(r"\b(?:what|which)\s+(\w+)", re.IGNORECASE)
_LOOSE_TYPES = frozenset(["person", "place", "organization"])  # a name the finder could not type may be one
_VALUE_TYPES = frozenset(["date", "number"])
_GENERIC_MODIFIERS = frozenset(
    ["another", "other", "same", "new", "first", "last", "main", "primary", "such", "certain", "different",
     "various", "similar", "particular", "specific", "whole", "entire", "own", "current", "original", "second"]
)  # fmt: skip
_KIND_WORDS = frozenset(stem(w) for w in ["kind", "type", "sort", "form", "variety"])
_CALENDAR_RE = re.compile(
    r"^(?:January|February|March|April|May|June|July|August|September|October|November|December|"
    r"Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday|Spring|Summer|Autumn|Fall|Winter)$",
    re.IGNORECASE,
)  # a lone month or season is a time, never a name
_LOCATIVE = frozenset(["in", "within", "inside", "at", "on", "near", "along", "beside", "between", "among", "under"])
_SETTING_PREPOSITIONS: dict[str, frozenset[str]] = {
    "place": _LOCATIVE,
    "date": frozenset(["in", "during", "after", "before", "until", "since", "by", "on", "at"]),
}  # a where/when answer may be the phrase such a preposition opens, the preposition with it
_CLAUSE_BREAK = re.compile(r"[,;:()\u2014\"]|\s[\u2013-]\s")


@dataclass(frozen=True)
class _Span:
    first: int  # token range [first, last)
    last: int
    typed: bool  # a mention of the expected answer type
    mention: bool = False  # a named thing or value (entity mention)


def short_answer(intent: QuestionIntent, lead: Candidate) -> str | None:
    """The span of the lead that answers: among its mentions of the expected type (a date for "when", a
    number for "how many") and its runs of words beyond the question's, the one sitting right beside the
    question's words in the sentence (answers follow or precede what the question restates), preferring
    names and values to common words. None when the lead has no such span."""
    tokens = [(m.start(), m.end(), m.group(0)) for m in re.finditer(r"[\w'’.%€$£–-]+", lead.statement)]
    if not tokens:
        return None
    offered = [o for o in _options(intent) if o.casefold() in lead.statement.casefold()]
    if len(offered) == 1:
        return offered[0]  # "Which is older, A or B?": the answer is one of the options, the one the lead names
    in_question = [bool(matched(intent.weights, frozenset(content_stems(t)))) for _, _, t in tokens]
    anchors = [i for i, hit in enumerate(in_question) if hit]
    expected = _EXPECTED_MENTIONS.get(intent.answer_type, ())
    measure = _WHAT_HEAD_RE.search(intent.text)
    if measure is not None and stem(measure.group(1).casefold()) in _MEASURE_HEADS:
        expected = ("number",)  # "what percentage", "what fee": a value
    spans: list[_Span] = []
    mentions = find_mentions(lead.statement)
    for mention in mentions:
        if _named_in_question(mention.text, intent):
            continue
        first = next((i for i, (a, b, _) in enumerate(tokens) if b > mention.start), None)
        last = next((i for i in range(len(tokens) - 1, -1, -1) if tokens[i][0] < mention.end), None)
        lone_opener = first == last == 0 and mention.entity_type == "other" and not _inner_capital(tokens[0][2])
        if first is None or last is None or last < first or lone_opener:
            continue  # a lone capital opening the sentence ("Under", "Normally") is no name
        typed = mention.entity_type in expected or (
            mention.entity_type not in _VALUE_TYPES
            and not _CALENDAR_RE.match(mention.text)
            and _LOOSE_TYPES & set(expected)
        )  # the name finder often confuses people, places and organisations: any name may be the one asked for
        spans.append(_Span(first, last + 1, bool(typed), mention=True))
    for quoted in _QUOTED_RE.finditer(lead.statement):  # a quoted name ("the name "X"")
        inner = [i for i, (a, b, _) in enumerate(tokens) if a >= quoted.start(1) and b <= quoted.end(1)]
        if inner and not all(in_question[i] for i in inner):
            spans.append(_Span(inner[0], inner[-1] + 1, False, mention=True))
    if "date" in expected:  # "the 19th century", "the 1960s"
        for period in _PERIOD_RE.finditer(lead.statement):
            inner = [i for i, (a, b, _) in enumerate(tokens) if a >= period.start() and b <= period.end()]
            if inner and not all(in_question[i] for i in inner):
                spans.append(_Span(inner[0], inner[-1] + 1, True, mention=True))
    if "number" in expected:
        spans += [  # "eight presidents", "three sons": a count in words
            _Span(i, i + 1, True, mention=True)
            for i, t in enumerate(tokens)
            if _COUNT_WORD_RE.fullmatch(t[2]) and not in_question[i]
        ]
    spans += _joined(spans, tokens, lead.statement)
    head_phrases = _head_phrases(intent, tokens, in_question, lead.statement)
    # an instance ("diseases such as lupus") scores as an appositive does
    appositives = _appositives(intent, tokens, in_question, lead.statement) + _instances(
        tokens, in_question, lead.statement
    )
    cued = _cued_spans(intent, tokens, in_question, lead.statement)
    spans += head_phrases + appositives + cued
    run: int | None = None
    for i, (_, _, token) in enumerate([*tokens, (len(lead.statement), 0, "")]):
        # a run of words outside the question, not crossing a clause break (comma, dash, parenthesis)
        gap = lead.statement[tokens[i - 1][1] : tokens[i][0]] if 0 < i < len(tokens) else ""
        inside = bool(token) and not in_question[i] and not _CLAUSE_BREAK.search(gap)
        if run is not None and not inside:
            a, b = _trimmed(tokens, run, i)
            if a > run and tokens[run][2].casefold() in _SETTING_PREPOSITIONS.get(intent.answer_type, ()):
                # "where?": "within the stroma", a place like a name; "when?": "in old chloroplasts"
                place = intent.answer_type == "place"
                spans.append(_Span(run, b, place, mention=place))
            else:
                spans.append(_Span(a, b, False))
            run = None
        if bool(token) and not in_question[i] and run is None:
            run = i
    names = [sp for sp in spans if sp.mention]
    spans = [
        _Span(sp.first, min(sp.last, sp.first + SHORT_ANSWER_WORDS), sp.typed, sp.mention)
        for sp in spans
        if sp.last > sp.first
        # a run inside a longer name is a fragment of it ("Free" of "Free Town of Tolt")
        and (sp.mention or sp in cued or not any(n.first <= sp.first and sp.last <= n.last and n != sp for n in names))
    ]
    if expected and any(sp.typed for sp in spans):
        spans = [sp for sp in spans if sp.typed]  # "when": a date, never a nearby common word
    if not spans:
        return None

    def words_between(sp: _Span, anchor: int) -> int:
        """Words between the span and the anchor, not counting stop words."""
        lo, hi = (sp.last, anchor) if anchor >= sp.last else (anchor + 1, sp.first)
        return sum(1 for j in range(lo, hi) if not _stop(tokens[j][2]))

    named_at = {i for sp in spans if sp.mention for i in range(sp.first, sp.last)}
    heads = [i for i in anchors if stem(tokens[i][2].casefold()) in intent.head_terms]
    # "... can become what?", "... rather than what?": the answer fills the slot after the word before the wh-word
    slot_words = _before_wh(intent.text) | _final_verb(intent.text)
    slots = (
        [i for i in anchors if matched(slot_words, frozenset([stem(tokens[i][2].casefold())]))] if slot_words else []
    )

    # "Who was it directed against?": the answer follows the question's stranded preposition in the sentence
    stranded = _stranded(intent.text)
    after_stranded = {i + 1 for i, t in enumerate(tokens) if t[2].casefold() in stranded}

    def named(sp: _Span) -> bool:
        """A name or a value: a mention, a number, or a capital that does not merely open the sentence."""
        return any(
            i in named_at or tokens[i][2][:1].isdigit() or (i > 0 and tokens[i][2][:1].isupper())
            for i in range(sp.first, sp.last)
        )

    def fit(sp: _Span) -> float:
        before = sorted(words_between(sp, a) for a in anchors if a < sp.first)
        after = sorted(words_between(sp, a) for a in anchors if a >= sp.last)
        # answers sit at one edge of what the sentence restates of the question, not inside it
        closeness = max(sum(1.0 / (1 + g) for g in side[:3]) for side in (before, after))
        is_named = named(sp)
        common = sp.last - sp.first == 1 and not is_named  # one common word ("level", "taking"): rarely the answer
        beside_head = any(h < sp.first and words_between(sp, h) == 0 for h in heads)  # "which toxin": "toxin called X"
        return (
            closeness
            + (SHORT_HEAD_PHRASE_BONUS if sp in head_phrases else 0.0)
            + (SHORT_HEAD_PHRASE_BONUS + SHORT_HEAD_BONUS if sp in appositives else 0.0)
            + (SHORT_HEAD_PHRASE_BONUS if sp in cued else 0.0)
            + (SHORT_NAMED_BONUS if is_named else 0.0)
            + (SHORT_HEAD_BONUS if beside_head else 0.0)
            + (SHORT_SLOT_BONUS if any(h < sp.first and words_between(sp, h) == 0 for h in slots) else 0.0)
            - (SHORT_COMMON_PENALTY if common else 0.0)
            + (SHORT_SLOT_BONUS if _follows(sp.first, after_stranded, tokens) else 0.0)
        )

    best = max(spans, key=lambda sp: (fit(sp), sp.last - sp.first))
    last = best.last
    if last < len(tokens) and last in heads and last - best.first < SHORT_ANSWER_WORDS:
        last += 1  # "a progressive tax system": the head noun completes the phrase it ends
    return lead.statement[tokens[best.first][0] : tokens[last - 1][1]].strip(" ,.;:")


_STRANDABLE = _PREPOSITIONS | {"of", "as", "than"}
_ADJUNCT_OPENERS = frozenset(["during", "in", "at", "on", "after", "before", "since", "when", "while", "until"])


def _stranded(question: str) -> frozenset[str]:
    """The prepositions the question leaves without their object ("... directed against?", "translated
    into during the era of X?"): the last word, or one followed straight away by an adjunct's opener."""
    words = [w.casefold() for w in re.findall(r"[\w'’-]+", question)]
    out = {w for w, nxt in pairwise(words) if w in _STRANDABLE - {"out", "up", "off"} and nxt in _ADJUNCT_OPENERS}
    if words and words[-1] in _STRANDABLE:
        out.add(words[-1])
    return frozenset(out)


def _follows(first: int, slots: set[int], tokens: list[tuple[int, int, str]]) -> bool:
    """The span starting at `first` fills a slot: it starts there, or one function word after ("the")."""
    return first in slots or (first - 1 in slots and _stop(tokens[first - 1][2]))


def _inner_capital(word: str) -> bool:
    """ "Chu'Tsai", "McAdam", "al-Rashid": a capital inside the word marks a name even where the word opens
    the sentence and could otherwise be any capitalised word ("Under", "Normally")."""
    return any(ch.isupper() for ch in word[1:])


def _before_wh(question: str) -> frozenset[str]:
    """The stem of the content word right before a wh-word that does not open the question ("Tumors ... can
    become what?" -> "become"), or nothing."""
    match = re.search(r"((?:\w[\w'’-]*\s+)+?)(?:what|which|whom|who)\b", question.strip(), re.IGNORECASE)
    if match is None:
        return frozenset()
    content = [w for w in match.group(1).split() if not is_stopword(w)]
    if not content:
        return frozenset()
    return frozenset(content_stems(content[-1]))


_DO_QUESTION_RE = re.compile(
    r"^\s*(?:what|who|whom|which\s+[\w'’-]+|what\s+[\w'’-]+)\s+(?:do|does|did)\s+.*?\b([a-z][\w'’-]*)\s*\??\s*$",
    re.IGNORECASE,
)


def _final_verb(question: str) -> frozenset[str]:
    """ "What do chloroplasts in mesophyll cells lack?": the question ends on its verb, whose object it asks
    for, so the answer fills the slot after that verb in the sentence ("they lack rubisco")."""
    match = _DO_QUESTION_RE.match(question)
    if match is None or match.group(1).casefold() in _STRANDABLE or is_stopword(match.group(1)):
        return frozenset()
    return frozenset(content_stems(match.group(1)))


def _options(intent: QuestionIntent) -> list[str]:
    """The named options of a choice question ("Which is older, the A or the B?"): the last name before its
    final " or " and the first after it; none for any other question."""
    left, sep, right = intent.text.rpartition(" or ")
    if not sep or not _WH_RE.match(intent.text.strip()):
        return []
    before = [n for n in intent.names if n in left]
    after = [n for n in intent.names if n in right]
    return [before[-1], after[0]] if before and after else []


def _head_phrases(
    intent: QuestionIntent, tokens: list[tuple[int, int, str]], in_question: list[bool], text: str
) -> list[_Span]:
    """ "What system ...?", "What kind of pigments ...?": the words the sentence puts before the question's
    head noun name the kind asked for ("a progressive tax system", "phycobilin pigments"): the phrase they
    make with the head, when at least one of them is not the question's."""
    out = []
    for h, (_, _, token) in enumerate(tokens):
        key = stem(token.casefold())
        if not in_question[h] or key != intent.head_noun or key in _KIND_WORDS:
            continue
        first = h
        while (
            first > 0
            and h - first < SHORT_ANSWER_WORDS - 1
            and (not in_question[first - 1] or stem(tokens[first - 1][2].casefold()) in intent.head_terms)
            and not _stop(tokens[first - 1][2])
            and not _CLAUSE_BREAK.search(text[tokens[first - 1][1] : tokens[first][0]])
        ):
            first -= 1
        while first < h and tokens[first][2].casefold() in _GENERIC_MODIFIERS:
            first += 1  # "another toxin", "the main logo": no kind named
        if not all(in_question[first:h]):
            out.append(_Span(first, h + 1, False))
    return out


def _appositives(
    intent: QuestionIntent, tokens: list[tuple[int, int, str]], in_question: list[bool], text: str
) -> list[_Span]:
    """ "What crop ...?": "a major food crop, sorghum, along with ...": the words set off by a comma right
    after the question's head noun name it (not when an instance cue follows: `_instances` reads those)."""
    out = []
    for h in range(len(tokens) - 1):
        if not in_question[h] or stem(tokens[h][2].casefold()) != intent.head_noun or _instance_cue(tokens, h + 1):
            continue
        if text[tokens[h][1] : tokens[h + 1][0]].strip() != ",":
            continue
        last = h + 1
        while (
            last < len(tokens)
            and last - h <= SHORT_ANSWER_WORDS
            and (last == h + 1 or not _CLAUSE_BREAK.search(text[tokens[last - 1][1] : tokens[last][0]]))
        ):
            last += 1
        closed = last < len(tokens) and _CLAUSE_BREAK.search(text[tokens[last - 1][1] : tokens[last][0]])
        if closed and not all(in_question[h + 1 : last]):
            out.append(_Span(h + 1, last, False))  # an appositive closed by a comma or dash, not the clause's end
    return out


def _instances(tokens: list[tuple[int, int, str]], in_question: list[bool], text: str) -> list[_Span]:
    """ "What is an autoimmune disease that ...?": "autoimmune diseases such as lupus erythematosus": the words
    after a question word and "such as", "including" or "like" name an instance of it, up to the clause's end
    or the question's next word ("lupus erythematosus strike women": not "strike")."""
    out = []
    for h in range(len(tokens) - 1):
        cue = _instance_cue(tokens, h + 1) if in_question[h] else 0
        if not cue:
            continue
        first = h + 1 + cue
        last = _clause_end(tokens, text, first)
        last = next((i for i in range(first, last) if in_question[i]), last)
        if last > first:
            out.append(_Span(first, last, False))
    return out


def _instance_cue(tokens: list[tuple[int, int, str]], at: int) -> int:
    """The length in words of the instance cue ("such as", "including", "like") starting at `at`, or 0."""
    following = [t.casefold() for _, _, t in tokens[at : at + 3]]
    if following[:2] == ["such", "as"] and len(following) == 3:
        return 2
    return 1 if len(following) >= 2 and following[0] in ("including", "like") else 0


def _clause_end(tokens: list[tuple[int, int, str]], text: str, first: int) -> int:
    """Where a span starting at `first` ends: at most SHORT_ANSWER_WORDS words, not across a clause break."""
    last = first
    while (
        last < len(tokens)
        and last - first < SHORT_ANSWER_WORDS
        and (last == first or not _CLAUSE_BREAK.search(text[tokens[last - 1][1] : tokens[last][0]]))
    ):
        last += 1
    return last


_MANNER_RE = re.compile(
    r"^\s*how\s+(?!many\b|much\b|long\b|old\b|far\b|often\b|big\b|large\b|tall\b|high\b|wide\b|deep\b|soon\b)",
    re.IGNORECASE,
)
_REASON_CUES: tuple[tuple[str, ...], ...] = (
    ("because", "of"), ("because",), ("due", "to"), ("owing", "to"), ("as", "a", "result", "of"), ("in", "order", "to"),
    ("so", "that"), ("for", "fear"), ("out", "of"),
)  # fmt: skip
_MANNER_CUES: tuple[tuple[str, ...], ...] = (("by", "means", "of"), ("by",), ("through",), ("using",))


_NAMING_RE = re.compile(r"\b(?:name|named|called|known as|termed|titled|nickname)\b", re.IGNORECASE)
_NAMING_CUES: tuple[tuple[str, ...], ...] = (
    ("the", "name"),
    ("named",),
    ("called",),
    ("known", "as"),
    ("termed",),
    ("titled",),
    ("dubbed",),
    ("nicknamed",),
)


def _cued_spans(
    intent: QuestionIntent, tokens: list[tuple[int, int, str]], in_question: list[bool], text: str
) -> list[_Span]:
    """ "Why ...?": the words after "because (of)", "due to", "for fear" ("for fear of betrayal"); "How do
    members vote?": the words after "by (means of)", "through", "using"; "What is X called?", "What did X name
    itself?": the words after "called", "named", "known as", "the name". Up to the clause's end."""
    if intent.answer_type == "reason":
        cues = _REASON_CUES
    elif _MANNER_RE.match(intent.text):
        cues = _MANNER_CUES
    elif _NAMING_RE.search(intent.text):
        cues = _NAMING_CUES
    else:
        return []
    lowered = [t.casefold() for _, _, t in tokens]
    out = []
    for i in range(len(tokens)):
        cue = next((c for c in cues if tuple(lowered[i : i + len(c)]) == c), None)
        if cue is None:
            continue
        first = i + len(cue) if cue[0] != "for" else i + 1  # "for fear of X": the fear is the reason
        last = _clause_end(tokens, text, first)
        first, last = _trimmed(tokens, first, last)  # "named after the X": the X
        if last > first and not all(in_question[first:last]):
            out.append(_Span(first, last, False))
    return out


def _joined(spans: Sequence[_Span], tokens: list[tuple[int, int, str]], text: str) -> list[_Span]:
    """Mentions joined by "and" or listed with commas ("Ann Lee and Bo Lee", "A, B, and C"): one answer
    span each run, when it fits in a short answer."""
    mentions = sorted((sp for sp in spans if sp.mention), key=lambda sp: sp.first)
    out = []
    start: _Span | None = None
    for a, b in pairwise(mentions):
        between = text[tokens[a.last - 1][1] : tokens[b.first][0]].strip()
        if between in ("and", "or", "&", ",", ", and", ", or"):
            start = start or a
            if b.last - start.first <= SHORT_ANSWER_WORDS:
                out.append(_Span(start.first, b.last, start.typed, mention=True))
        else:
            start = None
    return out


def _trimmed(tokens: list[tuple[int, int, str]], a: int, b: int) -> tuple[int, int]:
    while a < b and _stop(tokens[a][2]):
        a += 1
    while b > a and _stop(tokens[b - 1][2]):
        b -= 1
    return a, b


def _stop(token: str) -> bool:
    return is_stopword(token)
