"""Cross-verification: merge duplicate facts, find independent support, score confidence, flag conflicts.

- Near-duplicate facts (the same content words, or nearly) are merged into one fact whose evidence is
  the union of theirs; the surviving id is the representative's (most relevant, then earliest).
- A fact is also supported by any other source that contains a sentence saying nearly the same thing
  (found lexically) about the same named things with the same numbers; that sentence becomes an extra
  evidence quote. Two sentences from one template about two different subjects are two facts.
- Independent support: different registered domains for web sources (two URLs of one site are one
  witness), different documents for local sources. `verified` = at least two independent witnesses and
  a confidence at or above the domain's threshold.
- Confidence = agreement (independent witnesses) + credibility of the best witnesses (provider type:
  academic > local > encyclopedia > web) + extraction quality, minus a penalty for contradictions.
- Relevance through links (engines/text/linking.py): the facts of a document that a relevant fact of
  another document names are raised toward that fact's relevance (the next hop of a trail).
- Contradictions: facts about the same subject that say nearly the same thing but with different
  numbers, or with and without a negation. Each keeps the other's id.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

from research_tool.core.logging import get_logger
from research_tool.engines.text.entities import find_mentions
from research_tool.engines.text.facts import clean_statement, extraction_quality
from research_tool.engines.text.linking import linked_relevance
from research_tool.engines.text.sentences import split_sentences
from research_tool.engines.text.tokens import content_stems, has_negation, stem_set
from research_tool.models.entities import Evidence, Fact, SourceResult, normalize_key

log = get_logger(__name__)

DUPLICATE_SIMILARITY = 0.85  # Jaccard of content stems above which two facts are one
SUPPORT_SIMILARITY = 0.7  # another source's sentence this close to a fact supports it
CONFLICT_OVERLAP = 0.6  # two statements this close that differ in a number or a negation conflict

PROVIDER_CREDIBILITY: dict[str, float] = {
    "semantic_scholar": 0.9,
    "arxiv": 0.85,
    "pubmed": 0.9,
    "unpaywall": 0.85,
    "local": 0.8,
    "wikipedia": 0.75,
    "exa": 0.6,
    "tavily": 0.6,
    "brave": 0.55,
    "duckduckgo": 0.55,
}
DEFAULT_CREDIBILITY = 0.5
AGREEMENT_SCORE = {0: 0.2, 1: 0.35, 2: 0.6, 3: 0.75}
MAX_AGREEMENT_SCORE = 0.85

_SECOND_LEVEL = frozenset(["co", "com", "org", "net", "gov", "ac", "edu", "ne", "or", "go", "mil"])
_NUMBER_RE = re.compile(r"\d[\d,]*(?:\.\d+)?")
_YEAR_RE = re.compile(r"1[5-9]\d\d|20\d\d")  # written without a thousands comma
# numbers written as words: "the second single" and "the fourth single" are two claims
_NUMBER_WORDS_RE = re.compile(
    r"\b(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|twenty|thirty|forty|fifty|hundred|"
    r"thousand|million|billion|first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|eleventh|"
    r"twelfth|last|once|twice|thrice|half|quarter|dozen)\b",
    re.IGNORECASE,
)


def source_credibility(source: SourceResult | None) -> float:
    """Credibility of a source by its provider type; an academic DOI nudges it up."""
    if source is None:
        return DEFAULT_CREDIBILITY
    base = PROVIDER_CREDIBILITY.get(source.source_name, DEFAULT_CREDIBILITY)
    if source.doi:
        base = max(base, 0.85)
    return base


def witness_key(url: str) -> str:
    """Who is speaking: the registered domain of a web URL, or the document of a local/file URL."""
    parts = urlsplit(url)
    if parts.scheme in ("http", "https") and parts.hostname:
        labels = parts.hostname.casefold().removeprefix("www.").split(".")
        if len(labels) >= 3 and labels[-2] in _SECOND_LEVEL and len(labels[-1]) == 2:
            return ".".join(labels[-3:])
        return ".".join(labels[-2:])
    return url  # file://path#doc-id, local:..., and anything else: each document is its own witness


def similarity(a: frozenset[str], b: frozenset[str]) -> float:
    if not a or not b:
        return 0.0
    return len(a & b) / len(a | b)


@dataclass
class _Group:
    representative: Fact
    members: list[Fact]
    stems: frozenset[str]


def cross_verify(facts: list[Fact], sources: dict[str, SourceResult], threshold: float) -> list[Fact]:
    """Merged, cross-checked facts (same order as their representatives first appeared)."""
    groups = _merge_duplicates(facts)
    sentence_index = _SentenceIndex(sources)
    merged: list[Fact] = []
    for group in groups:
        evidence = _union_evidence(member.evidence for member in group.members)
        evidence += sentence_index.support(
            group.stems, {e.source_url for e in evidence}, group.representative.statement
        )
        rep = group.representative
        merged.append(
            rep.model_copy(
                update={
                    "evidence": evidence,
                    "relevance": max(m.relevance for m in group.members),
                    "iteration": min(m.iteration for m in group.members),
                    "contradictions": [],
                }
            )
        )
    raised = linked_relevance(merged, sources)
    merged = [f.model_copy(update={"relevance": raised[f.id]}) if f.id in raised else f for f in merged]
    conflicts = _contradictions(merged)
    result: list[Fact] = []
    for fact in merged:
        witnesses = _witnesses(fact, sources)
        conflicting = sorted(conflicts.get(fact.id, set()))
        confidence = _confidence(fact, witnesses, sources, bool(conflicting))
        result.append(
            fact.model_copy(
                update={
                    "confidence": confidence,
                    "verified": len(witnesses) >= 2 and confidence >= threshold and not conflicting,
                    "contradictions": conflicting,
                }
            )
        )
    log.debug(
        "cross_verified",
        facts_in=len(facts),
        facts_out=len(result),
        verified=sum(f.verified for f in result),
        contradictions=sum(bool(f.contradictions) for f in result),
    )
    return result


def _merge_duplicates(facts: list[Fact]) -> list[_Group]:
    ordered = sorted(facts, key=lambda f: (-f.relevance, f.iteration, f.id))
    groups: list[_Group] = []
    by_key: dict[str, int] = {}
    by_stem: dict[str, list[int]] = defaultdict(list)
    for fact in ordered:
        key = normalize_key(fact.statement)
        stems = stem_set(fact.statement)
        match = by_key.get(key)
        if match is None:
            shared: dict[int, int] = defaultdict(int)
            for stem_key in stems:
                for index in by_stem.get(stem_key, ()):
                    shared[index] += 1
            needed = DUPLICATE_SIMILARITY * len(stems)
            match = next(
                (
                    index
                    for index in sorted(shared)
                    if shared[index] >= needed
                    and similarity(groups[index].stems, stems) >= DUPLICATE_SIMILARITY
                    and _same_claim(groups[index].representative.statement, fact.statement)
                ),
                None,
            )
        if match is None:
            groups.append(_Group(representative=fact, members=[fact], stems=stems))
            by_key[key] = len(groups) - 1
            for stem_key in stems:
                by_stem[stem_key].append(len(groups) - 1)
        else:
            groups[match].members.append(fact)
            by_key.setdefault(key, match)
    first_seen = {f.id: i for i, f in enumerate(facts)}
    return sorted(groups, key=lambda g: min(first_seen[m.id] for m in g.members))


def _same_claim(a: str, b: str) -> bool:
    """Near-identical wording is one claim only if its named things, numbers (in digits or words) and
    negation agree too: two sentences built from one template about two different teams or people, or
    two singles of one album ("the second single", "the fourth single"), are two facts."""
    return (
        _numbers(a) == _numbers(b)
        and _number_words(a) == _number_words(b)
        and has_negation(a) == has_negation(b)
        and _names(a) == _names(b)
    )


def _number_words(statement: str) -> frozenset[str]:
    return frozenset(w.casefold() for w in _NUMBER_WORDS_RE.findall(statement))


def _names(statement: str) -> frozenset[str]:
    """The named things of a statement (not dates or quantities, which `_numbers` compares)."""
    return frozenset(normalize_key(m.text) for m in find_mentions(statement) if m.entity_type not in ("date", "number"))


def _union_evidence(evidence_lists: Iterable[list[Evidence]]) -> list[Evidence]:
    seen: set[str] = set()
    out: list[Evidence] = []
    for evidence in evidence_lists:
        for item in evidence:
            if item.source_url not in seen:
                seen.add(item.source_url)
                out.append(item)
    return out


class _SentenceIndex:
    """Every sentence of every source, indexed by stem, to find other sources that state a fact too."""

    def __init__(self, sources: dict[str, SourceResult]) -> None:
        self.sentences: list[tuple[str, str, frozenset[str]]] = []  # (url, quote, stems)
        self.by_stem: dict[str, list[int]] = defaultdict(list)
        for url, source in sources.items():
            for sentence in split_sentences(source.text()):
                stems = frozenset(content_stems(clean_statement(sentence.text)))
                if len(stems) < 3:
                    continue
                index = len(self.sentences)
                self.sentences.append((url, sentence.text, stems))
                for key in stems:
                    self.by_stem[key].append(index)

    def support(self, stems: frozenset[str], exclude_urls: set[str], statement: str | None = None) -> list[Evidence]:
        """Sentences of other sources that say nearly the same thing; with `statement`, only those whose
        named things and numbers agree with it."""
        if len(stems) < 3:
            return []
        counts: dict[int, int] = defaultdict(int)
        for key in stems:
            for index in self.by_stem.get(key, ()):
                counts[index] += 1
        found: dict[str, Evidence] = {}
        needed = SUPPORT_SIMILARITY * len(stems)
        for index, shared in counts.items():
            if shared < needed:
                continue
            url, quote, other = self.sentences[index]
            if url in exclude_urls or url in found:
                continue
            if similarity(stems, other) >= SUPPORT_SIMILARITY and (
                statement is None or _same_claim(statement, clean_statement(quote))
            ):
                found[url] = Evidence(source_url=url, quote=quote)
        return [found[url] for url in sorted(found)]


def _witnesses(fact: Fact, sources: dict[str, SourceResult]) -> dict[str, float]:
    """Independent witnesses of a fact -> the best credibility among that witness's URLs."""
    witnesses: dict[str, float] = {}
    for item in fact.evidence:
        key = witness_key(item.source_url)
        credibility = source_credibility(sources.get(item.source_url))
        witnesses[key] = max(witnesses.get(key, 0.0), credibility)
    return witnesses


def _confidence(fact: Fact, witnesses: dict[str, float], sources: dict[str, SourceResult], contradicted: bool) -> float:
    agreement = AGREEMENT_SCORE.get(len(witnesses), MAX_AGREEMENT_SCORE)
    best = sorted(witnesses.values(), reverse=True)[:3]
    credibility = sum(best) / len(best) if best else DEFAULT_CREDIBILITY
    quality = extraction_quality(fact.statement)
    score = 0.5 * agreement + 0.3 * credibility + 0.2 * quality - (0.15 if contradicted else 0.0)
    return round(min(1.0, max(0.0, score)), 3)


def _numbers(statement: str) -> set[str]:
    """Numbers as written, minus thousands commas; "1,200" becomes "1,200"->"1200*" so it is never a year."""
    return {n.replace(",", "") + ("*" if "," in n else "") for n in _NUMBER_RE.findall(statement)}


def _subject_key(fact: Fact) -> str:
    if fact.subject:
        return normalize_key(fact.subject)
    mentions = [m for m in find_mentions(fact.statement) if m.entity_type not in ("date", "number")]
    return normalize_key(mentions[0].text) if mentions else ""


def _contradictions(facts: list[Fact]) -> dict[str, set[str]]:
    """Pairs of facts on the same subject that differ in a number or in negation."""
    by_subject: dict[str, list[Fact]] = defaultdict(list)
    for fact in facts:
        key = _subject_key(fact)
        if key:
            by_subject[key].append(fact)
    conflicts: dict[str, set[str]] = defaultdict(set)
    for group in by_subject.values():
        for i, first in enumerate(group):
            for second in group[i + 1 :]:
                if _conflict(first.statement, second.statement):
                    conflicts[first.id].add(second.id)
                    conflicts[second.id].add(first.id)
    return conflicts


def _conflict(a: str, b: str) -> bool:
    if normalize_key(a) == normalize_key(b):
        return False
    words_a = frozenset(s for s in content_stems(a) if not _NUMBER_RE.fullmatch(s))
    words_b = frozenset(s for s in content_stems(b) if not _NUMBER_RE.fullmatch(s))
    if similarity(words_a, words_b) < CONFLICT_OVERLAP:
        return False
    numbers_a, numbers_b = _numbers(a), _numbers(b)
    years_a, years_b = {n for n in numbers_a if _YEAR_RE.fullmatch(n)}, {n for n in numbers_b if _YEAR_RE.fullmatch(n)}
    values_a, values_b = numbers_a - years_a, numbers_b - years_b
    if years_a and years_b and years_a != years_b:
        # "founded in 1998" vs "founded in 2001" conflict; "13,527 in 2010" vs "1,938 in 2000" are two times
        return not (values_a or values_b)
    if values_a and values_b and values_a != values_b:
        return True
    return has_negation(a) != has_negation(b)
