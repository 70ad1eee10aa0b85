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
- Rules kept beside the ranker (each measured with and without in docs/history/answer-selection.md): yes/no
  comparisons decided from each named thing's own page and choice questions ("which came first, A or B?")
  by each option's year (`verdicts.py`); how-to questions led by the best API's call signature
  (`howto_answers.py`); a second hop (a lead that names another page of the pool leads on to that page's
  typed sentence); "the difference between A and B" answered only by a lead naming both; the short answer,
  the lead's best span by the fitted span ranker, given only when its fitted gate passes (`short_answers.py`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from research_tool.engines.base import NumberedSource
from research_tool.engines.text.answer_checks import (
    corrected,
    decided_verdict,
    names_no_source_mentions,
    span_answers,
    title_stems,
)
from research_tool.engines.text.candidates import Candidate, SourceDoc, build_candidates
from research_tool.engines.text.entities import PERIOD_RE, find_mentions
from research_tool.engines.text.howto_answers import CODE_SPAN_RE, howto_answer
from research_tool.engines.text.question_intent import VALUE_TYPES, QuestionIntent, classify_question
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
from research_tool.engines.text.reader_mix import ReaderMix, collection_kind, load_mix
from research_tool.engines.text.short_answers import AskedFor, best_span, load_span_model
from research_tool.engines.text.tokens import stem_set
from research_tool.engines.text.verdicts import choice, is_comparison, yes_no
from research_tool.models.entities import normalize_key

MAX_TYPED_CANDIDATES = 40
MAX_ANSWER_SENTENCES = 4

# The answer reader (`providers/local_corpus/reader.py`): question, [(sentence, context)] -> the probability each
# sentence answers the question; an empty list when it cannot run (the lexical ranker decides alone).
AnswerReader = Callable[[str, Sequence[tuple[str, str]]], Sequence[float]]


# --- scoring --------------------------------------------------------------------------------------------


def type_filler(intent: QuestionIntent, statement: str) -> str | None:
    """A value of the expected answer type in `statement` that the question does not already name."""
    kind = intent.answer_type
    mentions = [m for m in find_mentions(statement) if not _named_in_question(m.text, intent)]
    if kind == "date":
        found = next((m.text for m in mentions if m.entity_type == "date"), None)
        period = PERIOD_RE.search(statement)
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
        spans = [m.group(0) for m in CODE_SPAN_RE.finditer(statement)]
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
                    typed=None if c.filler is None else "value" if intent.answer_type in VALUE_TYPES else "name",
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

# The span gate's probability that gives a short answer once `span_answers` has checked the span: on the owndocs fit
# folders (205 questions) 0.5753 (the gate's own threshold) gave 12 right and none wrong, 0.35 19 and none, 0.25 21
# and none, 0.15 21 and none; without the checks 0.5753 gave 17 right and 11 wrong (docs/history/answer-selection.md).
CHECKED_SPAN_GATE = 0.25
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
    reason: str | None = None  # why not answered, in one line, when more is known than "no sentence answers"
    span: str | None = None  # the lead's best span, given as `short_answer` only when the fitted gate passes it


def select_answer(
    question: str,
    sources: Sequence[NumberedSource],
    *,
    model: Model | None = None,
    rules: frozenset[str] = RULES,
    similarity: SentenceSimilarity | None = None,
    reader: AnswerReader | None = None,
) -> AnswerSelection:
    """The ranker's best sentence leads when its confidence clears the fitted threshold; `rules` names the
    special cases kept beside it (each measured with and without in docs/history/answer-selection.md). `similarity`
    (the `semantic` extra's sentence encoder, when the caller has it) adds the semantic features and selects
    the weight set fitted with them."""
    model = model or load_model(semantic=similarity is not None)
    intent = classify_question(question)
    docs = build_candidates(sources)
    pool = rank_candidates(intent, docs, model, similarity)
    if not pool and not any(d.signature for d in docs):
        return AnswerSelection([], None, False)
    unnamed = names_no_source_mentions(intent, docs)
    if unnamed:
        closest = sorted(pool, key=lambda c: (-c.score, c.n, c.index))[:2]
        reason = f"None of them mentions {', '.join(unnamed)}"
        return AnswerSelection([], None, False, closest=closest, reason=reason)
    mix = read_candidates(intent, pool, reader) if reader is not None and reads_alone(intent, docs, pool) else None
    if mix is not None and intent.answer_type == "yes_no" and "yes_no" in rules and not is_comparison(intent, docs):
        return read_yes_no(intent, pool, mix, title_stems(docs))
    if intent.answer_type == "yes_no" and "yes_no" in rules and not is_comparison(intent, docs):
        return lexical_yes_no(intent, pool, model, title_stems(docs))
    if intent.answer_type == "yes_no" and "yes_no" in rules:
        verdict = yes_no(intent, docs, pool)
        if verdict is None:
            return AnswerSelection([], None, False, closest=sorted(pool, key=lambda c: -c.score)[:2])
        said = verdict.verdict
        return AnswerSelection(verdict.sentences[: MAX_ANSWER_SENTENCES - 1], said.casefold(), True, verdict=said)
    if intent.answer_type == "howto" and "howto_lead" in rules and mix is None:
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
    if mix is not None:  # the threshold fitted for this kind of collection (`reader_mix.collection_kind`)
        unlikely = lead.reading < mix.refusal_threshold(collection_kind([s.source.text() for s in sources]))
    else:
        unlikely = lead.confidence < model.answered_at
    if unlikely or not _states_the_compared(intent, lead):
        closest = list({c.statement: c for c in reversed(ranked[:4])}.values())[::-1][:2]  # one of each
        return AnswerSelection([], None, False, closest=closest)
    # A lead the reader read stands: it read the sentence with its title and the one before, which is what the
    # hop guesses from (on the fit pools, hopping from read leads lost owndocs 1 of 56 and gained nothing).
    hopping = "second_hop" in rules and mix is None
    hop = _second_hop(lead, pool, {d.n: d.title_key for d in docs}) if hopping else None
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
    share = lead.lexical_share if mix is not None else lead.share  # the span gate was fitted on lexical shares
    found = best_span(asked_for(intent), lead.statement, share, lead.confidence)
    span = found.text if found is not None else None
    # the span checks (`answer_checks.span_answers`) carry the precision, so the gate may pass more spans
    precise = found is not None and found.probability >= min(load_span_model().threshold, CHECKED_SPAN_GATE)
    precise = precise and span is not None and span_answers(intent, lead, span)
    precise = precise and not corrected(lead, _after(lead, docs))
    return AnswerSelection(chosen, span if "short_answer" in rules and precise else None, True, span=span)


def _after(lead: Candidate, docs: Sequence[SourceDoc]) -> str:
    """The sentence after the lead in its page ("" when it is the last)."""
    doc = next((d for d in docs if d.n == lead.n), None)
    later = [c for c in doc.candidates if c.index > lead.index] if doc is not None else []
    return min(later, key=lambda c: c.index).statement if later else ""


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
    """The lead, then the sentence that named its page when it came by a second hop and states less of the
    question than that sentence."""
    chosen = [lead]
    if lead.link is not None and lead.features.get("link", 0.0) > 0 and lead.coverage < lead.link.coverage:
        chosen.append(lead.link)
    return chosen


# --- the reader -----------------------------------------------------------------------------------------


READ_BRIDGE_TOP = 3  # a bridge among the lexical ranker's best three: the answer needs a second page


def reads_alone(intent: QuestionIntent, docs: Sequence[SourceDoc], pool: Sequence[Candidate]) -> bool:
    """Whether one sentence with its context can answer: the reader reads one at a time, so it leaves alone a
    how-to question that an API's call signature answers (a page of the sources has one: `howto_answer` leads with
    it), and a question that links pages (a bridge clause in the question, or a bridge, a sentence naming another
    page of the pool, among the lexical ranker's best three). A how-to question over pages with no call signature
    (a tool's prose docs, a handbook) is read like any other."""
    if intent.answer_type == "howto" and any(d.signature is not None for d in docs):
        return False
    if intent.links_pages:
        return False
    best = sorted(pool, key=lambda c: (-c.score, c.n, c.index))[:READ_BRIDGE_TOP]
    return not any(c.bridge for c in best)


def read_candidates(intent: QuestionIntent, pool: list[Candidate], reader: AnswerReader) -> ReaderMix | None:
    """The reader reads the lexical ranker's best `mix.read_top` candidates; each read one's score becomes the
    fitted mix of its reader logit and its lexical score (`reader_mix.json`), ahead of every unread one, and the
    shares are taken anew over the read ones. None (nothing changed) when the reader gave no probabilities."""
    mix = load_mix()
    read = sorted(pool, key=lambda c: (-c.score, c.n, c.index))[: mix.read_top]
    probabilities = list(reader(intent.text, [(c.statement, c.reader_context) for c in read])) if read else []
    if len(probabilities) != len(read) or not read:
        return None
    for c, p in zip(read, probabilities, strict=True):
        c.reading = p
    mixed = {id(c): mix.score(c.reading, c.score) for c in read}
    lowest, best_unread = min(mixed.values()), max((c.score for c in pool if id(c) not in mixed), default=0.0)
    for c in pool:
        c.lexical_share = c.share
        c.score = mixed[id(c)] if id(c) in mixed else lowest - 1.0 + (c.score - best_unread)  # unread: after the read
    top = max(mixed.values())
    mass = sum(math.exp(v - top) for v in mixed.values())
    for c in pool:
        c.share = math.exp(mixed[id(c)] - top) / mass if id(c) in mixed else 0.0
    return mix


def read_yes_no(
    intent: QuestionIntent, pool: Sequence[Candidate], mix: ReaderMix, titles: frozenset[str]
) -> AnswerSelection:
    """A yes/no question about one thing: the reader's best sentence decides it (`polarity_verdict`) when the
    reader finds it likely enough to bear on the question (`mix.yes_no_at`); else not answered, the two best
    sentences quoted as the closest."""
    ranked = sorted(pool, key=lambda c: (-c.score, c.n, c.index))
    if not ranked or ranked[0].reading < mix.yes_no_at:
        return AnswerSelection([], None, False, closest=ranked[:2])
    return _decided(intent, ranked, titles, reading=ranked[0].reading)


def lexical_yes_no(
    intent: QuestionIntent, pool: Sequence[Candidate], model: Model, titles: frozenset[str]
) -> AnswerSelection:
    """A yes/no question about one thing without the reader: the lexical ranker's best sentence decides it when its
    confidence clears the fitted threshold."""
    ranked = sorted(pool, key=lambda c: (-c.score, c.n, c.index))
    if not ranked or ranked[0].confidence < model.answered_at:
        return AnswerSelection([], None, False, closest=ranked[:2])
    return _decided(intent, ranked, titles, reading=None)


def _decided(
    intent: QuestionIntent, ranked: Sequence[Candidate], titles: frozenset[str], *, reading: float | None
) -> AnswerSelection:
    """The best sentence decides the verdict when it states what is asked (`decided_verdict`); otherwise the files do
    not say, and the two best sentences are quoted as the closest."""
    said = decided_verdict(intent, ranked[0], titles, reading)
    if said is None:
        return AnswerSelection([], None, False, closest=list(ranked[:2]))
    return AnswerSelection(list(ranked[:1]), said.casefold(), True, verdict=said)
