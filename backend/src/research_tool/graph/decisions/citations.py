"""The citation check (issue 2 item 5): every [n] must resolve, and the cited text must support the claim.

For each sentence of the answer and each finding, every cited number must name a numbered source
(else: removed, counted as unresolvable) and that source must contain a passage (a sentence, two
adjacent sentences, or the title) holding at least `min_support` of the sentence's content words,
compared by stem, and every number the sentence states (else: removed, counted as unsupported).
A sentence that states something and is left with no citation is dropped (or marked, if asked);
editorial lines are exempt: markdown headings and sentences set wholly in italics (`_..._`), which
engines use for notes such as "research stopped early".

Matching words is not enough when the source says the opposite with the same words (issue 14): a passage
whose polarity is flipped against the sentence never supports it. A flip is a content word the two share
that one side negates and the other does not (a negator or downtoner up to three words before it: "not",
"no", "never", "little", "hardly", "n't", ...), or a word of the sentence whose antonym stands in the passage
in its place ("increases" / "decreases", "precise" / "vague").

Every other piece of free text the model writes is checked too (issue 22): a sentence, finding, gap or short
answer holding a URL, e-mail address, phone number or street address that no numbered source holds is dropped
(engines/text/contact_details.py), editorial lines included; a gap or short answer addressed to an assistant
(engines/text/instructions.py) is dropped as well.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict

from research_tool.core.logging import get_logger
from research_tool.engines.base import FindingDraft, NumberedSource, SynthesisDraft
from research_tool.engines.text.contact_details import ContactGuard
from research_tool.engines.text.facts import clean_statement
from research_tool.engines.text.instructions import is_instruction_like
from research_tool.engines.text.sentences import split_sentences
from research_tool.engines.text.tokens import content_stems, is_stopword, stem, words
from research_tool.models.entities import Fact

log = get_logger(__name__)

DEFAULT_MIN_SUPPORT = 0.6
UNSUPPORTED_MARK = " _(unverified: no cited source supports this)_"
MARKER_RE = re.compile(r"\[(\d+)\]")
_NUMBER_RE = re.compile(r"\d[\d,]*(?:\.\d+)?")
_EDITORIAL_RE = re.compile(r"^\s*(?:#{1,6}\s|[_*][^_*].*[_*][.!?]?\s*$|>\s)")
MIN_CLAIM_WORDS = 3  # a sentence with fewer content words states nothing checkable
NEGATION_REACH = 3  # a negator applies to the content words up to this many words after it
NEGATORS = frozenset(
    {"not", "no", "never", "none", "nor", "neither", "cannot", "without", "little", "few", "hardly", "barely"}
    | {"scarcely", "lacks", "lack", "lacking", "fails", "fail", "failed", "nothing", "nobody", "nowhere"}
)
_ANTONYM_PAIRS = [
    ("increase", "decrease"), ("increase", "reduce"), ("rise", "fall"), ("raise", "lower"), ("more", "less"),
    ("more", "fewer"), ("higher", "lower"), ("high", "low"), ("larger", "smaller"), ("large", "small"),
    ("greater", "smaller"), ("precise", "vague"), ("precise", "imprecise"), ("accurate", "inaccurate"),
    ("effective", "ineffective"), ("safe", "unsafe"), ("safe", "dangerous"), ("true", "false"),
    ("positive", "negative"), ("success", "failure"), ("succeed", "fail"), ("gain", "loss"), ("win", "lose"),
    ("allow", "forbid"), ("allow", "prevent"), ("accept", "reject"), ("include", "exclude"), ("always", "never"),
    ("all", "none"), ("strong", "weak"), ("strengthen", "weaken"), ("fast", "slow"), ("faster", "slower"),
    ("early", "late"), ("earlier", "later"), ("before", "after"), ("maximum", "minimum"), ("major", "minor"),
    ("possible", "impossible"), ("likely", "unlikely"), ("common", "rare"), ("legal", "illegal"),
    ("present", "absent"), ("valid", "invalid"), ("correct", "incorrect"), ("significant", "insignificant"),
    ("support", "oppose"), ("confirm", "refute"), ("benefit", "harm"), ("improve", "worsen"), ("open", "closed"),
]  # fmt: skip
ANTONYMS: dict[str, frozenset[str]] = {}
for _a, _b in _ANTONYM_PAIRS:
    ANTONYMS[stem(_a)] = ANTONYMS.get(stem(_a), frozenset()) | {stem(_b)}
    ANTONYMS[stem(_b)] = ANTONYMS.get(stem(_b), frozenset()) | {stem(_a)}


class CitationCheck(BaseModel):
    model_config = ConfigDict(extra="forbid")

    draft: SynthesisDraft
    removed_unresolvable: int = 0
    removed_unsupported: int = 0
    sentences_dropped: int = 0
    foreign_details_dropped: int = 0  # sentences, findings, gaps and short answers with an unsourced contact detail


@dataclass(frozen=True)
class _Polarity:
    """What a piece of text negates and which words it has, to compare with another piece's."""

    stems: frozenset[str]  # every word's stem, stopwords included ("more", "before", "all")
    negated: frozenset[str]  # content stems a negator stands before


def polarity_of(text: str) -> _Polarity:
    tokens = [w.casefold().replace("’", "'") for w in words(text)]
    negated: set[str] = set()
    reach = 0
    for token in tokens:
        if token in NEGATORS or token.endswith("n't"):
            reach = NEGATION_REACH
            continue
        if reach > 0:
            if not is_stopword(token):
                negated.add(stem(token))
            reach -= 1
    return _Polarity(frozenset(stem(t) for t in tokens), frozenset(negated))


def polarity_flipped(claim: _Polarity, passage: _Polarity) -> bool:
    """True when the passage says the opposite of the claim with its words: a shared word negated on one
    side only, or a claim word replaced by its antonym."""
    shared = claim.stems & passage.stems
    if (claim.negated ^ passage.negated) & shared:
        return True
    return any(
        word not in passage.stems and (ANTONYMS.get(word, frozenset()) & passage.stems) - claim.stems
        for word in claim.stems
    )


@dataclass(frozen=True)
class _Passage:
    stems: frozenset[str]
    numbers: frozenset[str]
    polarity: _Polarity | None = None  # None for the title (it states nothing to flip)


class SupportIndex:
    """The passages of each numbered source, to test whether a sentence is supported by source n."""

    def __init__(self, sources: Sequence[NumberedSource]) -> None:
        self._sources = {numbered.n: numbered.source for numbered in sources}
        # Built on first use: a draft cites some of the sources it was given (8 of 15 in the `make run` demo), and
        # splitting a source's full text into passages is the costly part of the check.
        self._passages: dict[int, list[_Passage]] = {}

    def resolves(self, n: int) -> bool:
        return n in self._sources

    def _passages_of(self, n: int) -> list[_Passage]:
        passages = self._passages.get(n)
        if passages is None:
            source = self._sources.get(n)
            passages = self._passages[n] = _passages(source.title, source.text()) if source is not None else []
        return passages

    def support(self, sentence: str, n: int) -> float:
        """Best share of the sentence's content stems found in one passage of source n (0 when numbers differ)."""
        claim = _strip_markers(sentence)
        stems = frozenset(content_stems(claim))
        if not stems:
            return 1.0
        numbers = frozenset(_numbers(claim))
        polarity: _Polarity | None = None
        best = 0.0
        for passage in self._passages_of(n):
            if not numbers <= passage.numbers:
                continue
            share = len(stems & passage.stems) / len(stems)
            if share <= best:
                continue
            if passage.polarity is not None:
                polarity = polarity or polarity_of(claim)
                if polarity_flipped(polarity, passage.polarity):
                    continue  # the same words, the opposite meaning: no support
            best = share
        return best


def _passages(title: str, text: str) -> list[_Passage]:
    """Title, sentences and adjacent pairs; the title's words count in every passage (its implicit subject)."""
    sentences = [clean_statement(s.text) for s in split_sentences(text)]
    title_stems = frozenset(content_stems(title))
    out = [_Passage(title_stems, frozenset(_numbers(title)))] if title else []
    for index, sentence in enumerate(sentences):
        window = sentence if index == 0 else f"{sentences[index - 1]} {sentence}"
        for piece in {sentence, window}:
            stems = frozenset(content_stems(piece)) | title_stems
            out.append(_Passage(stems, frozenset(_numbers(piece)), polarity_of(piece)))
    return out


def _numbers(text: str) -> list[str]:
    return [n.replace(",", "").rstrip(".") for n in _NUMBER_RE.findall(text)]


def _strip_markers(text: str) -> str:
    return MARKER_RE.sub("", text)


def check_citations(
    draft: SynthesisDraft,
    sources: Sequence[NumberedSource],
    *,
    min_support: float = DEFAULT_MIN_SUPPORT,
    on_uncited: Literal["drop", "mark"] = "drop",
) -> CitationCheck:
    """The draft with every unresolvable or unsupported [n] removed, and uncited claims dropped or marked."""
    index = SupportIndex(sources)
    guard = ContactGuard(part for ns in sources for part in (ns.source.url, ns.source.title, ns.source.text()))
    counts = {"unresolvable": 0, "unsupported": 0, "dropped": 0, "foreign": 0}

    def sourced(text: str) -> bool:
        """False (and counted) when `text` holds a contact detail that no source holds."""
        if guard.allows(text):
            return True
        counts["foreign"] += 1
        return False

    def keep(n: int, sentence: str) -> bool:
        if not index.resolves(n):
            counts["unresolvable"] += 1
            return False
        if index.support(sentence, n) < min_support:
            counts["unsupported"] += 1
            return False
        return True

    paragraphs = []
    for paragraph in draft.answer.split("\n"):
        paragraphs.append(_check_paragraph(paragraph, keep, sourced, counts, on_uncited))
    answer = "\n".join(paragraphs).strip()
    answer = re.sub(r"\n{3,}", "\n\n", answer)

    findings: list[FindingDraft] = []
    for finding in draft.findings:
        if not sourced(finding.statement):
            counts["dropped"] += 1
            continue
        statement_markers = [int(n) for n in MARKER_RE.findall(finding.statement)]
        cited = list(dict.fromkeys([*finding.citations, *statement_markers]))
        kept = [n for n in cited if keep(n, finding.statement)]
        if not kept:
            counts["dropped"] += 1
            continue
        statement = _rewrite_markers(finding.statement, set(kept))
        findings.append(FindingDraft(statement=statement, citations=sorted(kept)))
    gaps = [gap for gap in draft.gaps if not is_instruction_like(gap) and sourced(gap)]
    short_answer = draft.short_answer
    if short_answer is not None and (is_instruction_like(short_answer) or not sourced(short_answer)):
        short_answer = None
    result = CitationCheck(
        draft=draft.model_copy(
            update={"answer": answer, "findings": findings, "gaps": gaps, "short_answer": short_answer}
        ),
        removed_unresolvable=counts["unresolvable"],
        removed_unsupported=counts["unsupported"],
        sentences_dropped=counts["dropped"],
        foreign_details_dropped=counts["foreign"],
    )
    if any(counts.values()):
        log.info("citations_checked", **counts)
    return result


def _check_paragraph(paragraph: str, keep, sourced, counts: dict[str, int], on_uncited: str) -> str:  # type: ignore[no-untyped-def]
    if not paragraph.strip():
        return paragraph
    if _EDITORIAL_RE.match(paragraph):
        if sourced(paragraph):
            return paragraph
        counts["dropped"] += 1
        return ""
    prefix = re.match(r"^\s*(?:[-*+]\s+|\d+[.)]\s+)?", paragraph).group(0)  # type: ignore[union-attr]
    out: list[str] = []
    for sentence in _answer_sentences(paragraph[len(prefix) :]):
        if not sourced(sentence):
            counts["dropped"] += 1  # an unsourced URL, phone number, e-mail or street address: never kept
            continue
        if _EDITORIAL_RE.match(sentence):
            out.append(sentence)
            continue
        markers = list(dict.fromkeys(int(n) for n in MARKER_RE.findall(sentence)))
        kept = {n for n in markers if keep(n, sentence)}
        rewritten = _rewrite_markers(sentence, kept)
        if kept:
            out.append(rewritten)
            continue
        if not markers and len(content_stems(sentence)) < MIN_CLAIM_WORDS:
            out.append(rewritten)  # never cited and no claim to support ("In short:")
            continue
        if on_uncited == "mark":
            out.append(rewritten.rstrip() + UNSUPPORTED_MARK)
        counts["dropped"] += 1
    body = " ".join(s for s in out if s.strip())
    return prefix + body if body else ""


def _answer_sentences(text: str) -> list[str]:
    """Sentences of an answer paragraph, each keeping the [n] markers that follow its full stop."""
    pieces = [s.text for s in split_sentences(text)]
    merged: list[str] = []
    for piece in pieces:
        leading = re.match(r"^(?:\s*\[\d+\])+[.,;]?", piece)
        if leading and merged:
            merged[-1] = merged[-1] + " " + leading.group(0).strip()
            piece = piece[leading.end() :].strip()
        if piece:
            merged.append(piece)
    return merged


def _rewrite_markers(sentence: str, kept: set[int]) -> str:
    seen: set[int] = set()

    def replace(match: re.Match[str]) -> str:
        n = int(match.group(1))
        if n in kept and n not in seen:
            seen.add(n)
            return match.group(0)
        return ""

    text = MARKER_RE.sub(replace, sentence)
    text = re.sub(r"[ \t]{2,}", " ", text)
    return re.sub(r"\s+([.,;:!?])", r"\1", text).strip()


def rank_sources_for_citation(facts: Sequence[Fact], limit: int) -> list[str]:
    """The URLs worth numbering for synthesis, best first: a source is as good as its best fact.

    Ranking by a source's single most relevant fact (verified facts weigh 25% more; ties go to the
    source with more supporting facts) keeps short, precise documents (the second hop of a
    multi-hop question often is one) ahead of long documents that merely have many loosely related
    sentences, which a sum over facts would favour.
    """
    best: dict[str, float] = {}
    count: dict[str, int] = {}
    for fact in facts:
        weight = fact.relevance * (1.25 if fact.verified else 1.0)
        for url in fact.source_urls:
            best[url] = max(best.get(url, 0.0), weight)
            count[url] = count.get(url, 0) + 1
    return sorted(best, key=lambda u: (-best[u], -count[u], u))[:limit]
