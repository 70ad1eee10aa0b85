"""Extractive synthesis: an answer that leads with the answer, and key findings, in the sources' own words.

The answer comes from `answering.select_answer`: the source sentence that best answers the question
(its expected answer type, its aspects, a second hop, a pronoun's antecedent), then one sentence per
remaining aspect or the sentence it leans on, at most four sentences; a yes/no question opens with its
verdict. Each sentence carries the [n] of its source and of every other source that states it word for
word. When no sentence answers, the answer says plainly that the sources found do not answer the
question and quotes the closest statements, and `answered` is false; `short_answer` is the span that
answers. Findings are one fact each (their statement is the fact's statement, so the report can look the
fact up). Gaps name what the chosen answer leaves unanswered (the whole question when it is not answered, a part of
a two-part question it does not fill, never a part it fills) and disagreements; the count of findings on one source is
the report's, made from the findings it lists (why research stopped is the report's header, not a gap); unreachable
providers, and a stop that cost the answer, are said under the answer.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

from research_tool.engines.base import FindingDraft, SynthesisDraft, SynthesisInput
from research_tool.engines.text.answer_parts import unanswered_parts
from research_tool.engines.text.answering import AnswerSelection, select_answer
from research_tool.engines.text.candidates import Candidate
from research_tool.engines.text.entities import find_mentions
from research_tool.engines.text.facts import clean_statement
from research_tool.engines.text.instructions import is_instruction_like
from research_tool.engines.text.tokens import stem_set
from research_tool.models.entities import Fact, normalize_key
from research_tool.models.stop_reasons import stopped_early_note

MIN_ANSWER_SENTENCES = 2
MAX_ANSWER_SENTENCES = 5
MAX_ANSWER_PER_SOURCE = 2
MAX_FINDINGS_PER_SOURCE = 3
MAX_CITED_SOURCES = 6
SOURCE_ORDER_WEIGHT = 0.3
NEAR_DUPLICATE = 0.8
ANSWER_MIN_RELEVANCE = 0.2
LINK_BONUS = 0.5  # a fact about something an earlier answer sentence introduced: the next hop
ANSWER_REDUNDANT = 0.5  # an answer sentence this close (Jaccard of stems) to an earlier one adds nothing
COVERAGE_WEIGHT = 0.6  # bonus for answer sentences that bring question terms no earlier sentence covered

NOT_ANSWERED = "_The sources found do not answer this question. The closest statements they make:_"
NOT_ANSWERED_BECAUSE = "_The sources found do not answer this question. {reason}. The closest statements they make:_"
NO_STATEMENT = "_The sources found do not answer this question: no retrieved source made a statement that bears on it._"


def synthesize_draft(request: SynthesisInput) -> SynthesisDraft:
    numbers = {ns.source.url: ns.n for ns in request.sources}
    ranked = _distinct(
        [
            f
            for f in request.facts
            if any(e.source_url in numbers for e in f.evidence) and not is_instruction_like(f.statement)
        ],
        key=lambda f: _rank(f),
    )
    selection = select_answer(request.query, request.sources, similarity=request.similarity, reader=request.reader)
    notes = _notes(request, answered=selection.answered)
    by_id = {f.id: f for f in ranked}
    if selection.answered and selection.sentences:
        lines = [f"{selection.verdict}."] if selection.verdict else []
        lines += [_cited_candidate(c, by_id, numbers) for c in selection.sentences]
        # one sentence a line (one markdown paragraph): the citation check judges each sentence on its own
        # even when a quoted sentence opens with code or lower case, where a sentence splitter would not cut
        answer = "\n".join(lines)
        lead_facts = [by_id[i] for i in (Fact.make_id(c.statement) for c in selection.sentences) if i in by_id]
    elif selection.closest or ranked:
        closest = [_cited_candidate(c, by_id, numbers) for c in selection.closest] or [
            _cited_sentence(f, numbers) for f in ranked[:MIN_ANSWER_SENTENCES]
        ]
        opening = NOT_ANSWERED_BECAUSE.format(reason=selection.reason) if selection.reason else NOT_ANSWERED
        answer = "\n".join([opening, *closest])
        lead_facts = []
    else:
        answer = NO_STATEMENT
        lead_facts = []
    if notes:
        answer = answer + "\n\n" + " ".join(notes)
    answer_facts = lead_facts or _answer_facts(request.query, ranked, _source_prior(numbers)) if ranked else []
    findings = _findings(answer_facts, ranked, numbers, request.max_findings)
    return SynthesisDraft(
        answer=answer,
        findings=findings,
        gaps=_gaps(request, ranked, selection),
        short_answer=selection.short_answer if selection.answered else None,
        answered=selection.answered,
    )


def _cited_candidate(candidate: Candidate, facts: dict[str, Fact], numbers: dict[str, int]) -> str:
    """A source sentence with the [n] of its own source and of every other source that states it word for word."""
    fact = facts.get(Fact.make_id(candidate.statement))
    cited = {candidate.n}
    if fact is not None:
        key = normalize_key(candidate.statement)
        cited |= {
            numbers[e.source_url]
            for e in fact.evidence
            if e.source_url in numbers and normalize_key(clean_statement(e.quote)) == key
        }
    markers = "".join(f"[{n}]" for n in sorted(cited))
    statement = candidate.statement.rstrip()
    if statement and statement[-1] in ".!":
        return f"{statement[:-1]} {markers}{statement[-1]}"
    return f"{statement} {markers}."


def _rank(fact: Fact) -> float:
    return (
        fact.relevance * (1.25 if fact.verified else 1.0)
        + 0.1 * fact.confidence
        - (0.1 if fact.contradictions else 0.0)
    )


def _distinct(facts: Sequence[Fact], key) -> list[Fact]:  # type: ignore[no-untyped-def]
    """Facts best first, near-duplicates (same content words, nearly) dropped."""
    kept: list[tuple[Fact, frozenset[str]]] = []
    for fact in sorted(facts, key=lambda f: (-key(f), f.id)):
        stems = stem_set(fact.statement)
        if any(_jaccard(stems, other) >= NEAR_DUPLICATE for _, other in kept):
            continue
        kept.append((fact, stems))
    return [f for f, _ in kept]


def _jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    return len(a & b) / len(a | b) if a and b else 0.0


def _source_prior(numbers: dict[str, int]) -> dict[str, float]:
    """The caller numbers sources best first: 1.0 for [1] down to near 0 for the last."""
    return {url: 1.0 - (n - 1) / max(1, len(numbers)) for url, n in numbers.items()}


def _answer_facts(question: str, ranked: list[Fact], prior: dict[str, float]) -> list[Fact]:
    """2-5 facts: the best one, then each time the best remaining, favouring the next hop of a chain."""
    question_names = {normalize_key(m.text) for m in find_mentions(question)}
    question_stems = stem_set(question)
    weights = _term_weights(question_stems, ranked)
    pool = [f for f in ranked if f.relevance >= ANSWER_MIN_RELEVANCE] or ranked[:MIN_ANSWER_SENTENCES]
    chosen: list[Fact] = []
    per_source: Counter[str] = Counter()
    introduced: set[str] = set()
    covered: set[str] = set()

    def score(fact: Fact) -> float:
        best_source = max((prior.get(e.source_url, 0.0) for e in fact.evidence), default=0.0)
        return (
            _rank(fact)
            + SOURCE_ORDER_WEIGHT * best_source
            + _link_bonus(fact, introduced)
            + _coverage_bonus(fact, weights, covered)
        )

    while pool and len(chosen) < MAX_ANSWER_SENTENCES:
        best = max(pool, key=lambda f: (score(f), -ranked.index(f)))
        pool.remove(best)
        home = best.evidence[0].source_url
        if per_source[home] >= MAX_ANSWER_PER_SOURCE:
            continue
        if any(_jaccard(stem_set(best.statement), stem_set(c.statement)) >= ANSWER_REDUNDANT for c in chosen):
            continue
        if chosen and score(best) < 0.5 * _rank(chosen[0]):
            break
        chosen.append(best)
        covered |= stem_set(best.statement) & question_stems
        per_source[home] += 1
        for mention in find_mentions(best.statement):
            key = normalize_key(mention.text)
            if mention.entity_type not in ("date", "number") and key not in question_names:
                introduced.add(key)
    if len(chosen) < MIN_ANSWER_SENTENCES:
        for fact in ranked:
            if fact not in chosen and len(chosen) < MIN_ANSWER_SENTENCES:
                chosen.append(fact)
    return chosen


def _term_weights(question_stems: frozenset[str], facts: Sequence[Fact]) -> dict[str, float]:
    """Inverse document frequency of each question term among the candidate facts: a term every fact
    shares ("python", "subprocess") says little; a rare one ("timeout") marks the part of the question
    that still needs its own sentence."""
    statements = [stem_set(f.statement) for f in facts]
    n = len(statements)
    return {s: math.log((n + 1) / (1 + sum(s in st for st in statements))) + 1.0 for s in question_stems}


def _coverage_bonus(fact: Fact, weights: dict[str, float], covered: set[str]) -> float:
    """Question terms this fact would be the first to cover (a how-to question has several parts)."""
    total = sum(weights.values())
    if not total:
        return 0.0
    new = (stem_set(fact.statement) & weights.keys()) - covered
    return COVERAGE_WEIGHT * sum(weights[s] for s in new) / total


def _link_bonus(fact: Fact, introduced: set[str]) -> float:
    """A fact about something an earlier answer sentence introduced continues the chain."""
    if not introduced:
        return 0.0
    subject = normalize_key(fact.subject or "")
    text = normalize_key(fact.statement)
    if subject in introduced or any(key and f" {key} " in f" {text} " for key in introduced):
        return LINK_BONUS
    return 0.0


def _citations(fact: Fact, numbers: dict[str, int]) -> list[int]:
    return sorted({numbers[e.source_url] for e in fact.evidence if e.source_url in numbers})


def _cited_sentence(fact: Fact, numbers: dict[str, int]) -> str:
    markers = "".join(f"[{n}]" for n in _citations(fact, numbers))
    statement = fact.statement.rstrip()
    if statement and statement[-1] in ".!":
        return f"{statement[:-1]} {markers}{statement[-1]}"
    return f"{statement} {markers}."


def _findings(answer_facts: list[Fact], ranked: list[Fact], numbers: dict[str, int], limit: int) -> list[FindingDraft]:
    """The answer's facts, then the best fact of each source not yet heard from, then the rest."""
    order: list[Fact] = list(answer_facts)
    heard = {f.evidence[0].source_url for f in answer_facts}
    rest = [f for f in ranked if f not in answer_facts]
    best_of: dict[str, Fact] = {}
    for fact in rest:
        best_of.setdefault(fact.evidence[0].source_url, fact)
    # new sources by their best fact, with the caller's numbering (best first) as a prior
    prior = _source_prior(numbers)
    for home in sorted(best_of, key=lambda u: (-(_rank(best_of[u]) + SOURCE_ORDER_WEIGHT * prior.get(u, 0.0)), u)):
        if home not in heard:
            heard.add(home)
            order.append(best_of[home])
    order += [f for f in rest if f not in order]
    findings: list[FindingDraft] = []
    per_source: Counter[str] = Counter()
    for fact in order:
        if len(findings) >= limit:
            break
        home = fact.evidence[0].source_url
        if per_source[home] >= MAX_FINDINGS_PER_SOURCE:
            continue
        if home not in per_source and len(per_source) >= MAX_CITED_SOURCES:
            continue
        citations = _citations(fact, numbers)
        if citations:
            findings.append(FindingDraft(statement=fact.statement, citations=citations))
            per_source[home] += 1
    return findings


def _notes(request: SynthesisInput, *, answered: bool) -> list[str]:
    """Said under the answer: which providers failed (plainly when others answered), and that research stopped
    early only when a limit stopped it before the sources answered."""
    notes: list[str] = []
    reached = sorted({ns.source.source_name for ns in request.sources} - set(request.unreachable_providers))
    if request.unreachable_providers and reached:
        notes.append(
            f"_Not reachable (no network?): {', '.join(request.unreachable_providers)}; "
            f"this answer comes from {', '.join(reached)} alone._"
        )
    elif request.degraded_mode:
        notes.append(
            "_Degraded mode: search providers failed during this session, so this answer rests only on "
            "the sources that could be retrieved._"
        )
    early = stopped_early_note(request.stop_reason, answered=answered)
    if early:
        notes.append(early)
    return notes


def _gaps(request: SynthesisInput, ranked: list[Fact], selection: AnswerSelection) -> list[str]:
    """What the answer does not answer (computed from the chosen answer, never for a part it fills), then the
    sources' disagreements."""
    gaps = [f"Not found in the sources: {part}." for part in unanswered_parts(request.query, selection)]
    by_id = {f.id: f for f in request.facts}
    for fact in ranked:
        other = next((by_id[c] for c in fact.contradictions if c in by_id), None)
        if other is not None and len(gaps) < 12:
            gaps.append(f'Sources disagree: "{fact.statement}" versus "{other.statement}"')
    return gaps
