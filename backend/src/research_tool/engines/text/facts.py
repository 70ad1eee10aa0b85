"""Sentence-level fact extraction: the source's own declarative sentences that bear on the question.

A fact is one sentence of the source, quoted exactly (`Evidence.quote` is the source's span) and
cleaned for display (`Fact.statement`: whitespace collapsed, numbered and closing footnote markers and doc
gutters gone; any other bracket stays, so the statement is still the source's words).
Relevance is the weighted share of the question's topic words the sentence covers, with the
document's title standing in for an implicit subject (a "She served as ..." sentence on a person's page),
and with the query that found the source as a second reference (a trail query names the bridge entity).
Only the most relevant sentences of a long document are kept.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from research_tool.engines.text.entities import clean_title, find_mentions
from research_tool.engines.text.instructions import is_instruction_like
from research_tool.engines.text.keyphrases import query_words
from research_tool.engines.text.sentences import Sentence, split_sentences
from research_tool.engines.text.tokens import content_stems, stem, stem_set, words
from research_tool.models.entities import Evidence, Fact, SourceResult

DEFAULT_MAX_FACTS_PER_SOURCE = 8
DEFAULT_MIN_RELEVANCE = 0.1
MAX_SENTENCE_WORDS = 90
MIN_SENTENCE_WORDS = 5
LIST_MIN_COMMAS = 5
LIST_COMMA_RATIO = 0.25
LONG_LEAD_IN_WORDS = 10  # a sentence ending in ":" that is at least this long still states something

# numbered footnotes ("[3]") would read as citation markers: they go wherever they stand. A worded or
# lettered one ("[citation needed]", "[note 2]", "[a]") goes only where it ends the sentence; inside it, the
# same brackets are often the text's own ("Z[i]", "deplore[s]", "[a]ccompanied"), and the quote stays verbatim.
_FOOTNOTE_RE = re.compile(r"\[\d+\]")
# (a closing one: nothing but a full stop after it, so the statement is still a prefix of the source's sentence)
_TRAILING_NOTE_RE = re.compile(r"\s*\[(?:citation needed|note \d+|[a-z]|[a-z][a-z ]{2,18}\?)\](?=\.?$)")
_GUTTER_RE = re.compile(r"\n[ \t]*\|[ \t]*")
_BOILERPLATE_RE = re.compile(
    r"cookie|javascript|subscribe|sign (?:in|up)|log ?in|click here|all rights reserved|©|privacy policy|"
    r"terms of (?:use|service)|newsletter|advertisement|share this|read more|skip to|^see also\b",
    re.IGNORECASE,
)
_PRONOUN_START_RE = re.compile(
    r"^(?:he|she|it|they|his|her|its|their|this|these|the (?:film|album|song|company|band|book|novel|"
    r"series|city|town|village|show|game|module|function|class|method|group|team|club|building))\b",
    re.IGNORECASE,
)
_PRONOUN_AFTER_CLAUSE_RE = re.compile(r"^[^.;]{0,40}?,\s*(?:he|she|it|they)\b", re.IGNORECASE)
_HEDGES = frozenset(
    """
    may might could possibly perhaps reportedly allegedly rumored rumoured likely unclear
    """.split()
)


@dataclass(frozen=True)
class QuestionProfile:
    """The question's topic stems with weights (names weigh more); built once per question."""

    weights: dict[str, float]

    @classmethod
    def of(cls, text: str) -> QuestionProfile:
        weights: dict[str, float] = {}
        for word in query_words(text):
            weights[stem(word)] = 1.0
        for mention in find_mentions(text):
            if mention.entity_type in ("number",):
                continue
            for word in query_words(mention.text):
                weights[stem(word)] = 1.5
        return cls(weights=weights)

    @property
    def total(self) -> float:
        return sum(self.weights.values())

    def coverage(self, stems: frozenset[str], implicit: frozenset[str] = frozenset()) -> float:
        """Weighted share of the profile found in `stems`; stems only in `implicit` (a title) count half."""
        if not self.weights:
            return 0.0
        score = 0.0
        for key, weight in self.weights.items():
            if key in stems:
                score += weight
            elif key in implicit:
                score += weight * 0.5
        return score / self.total


def clean_statement(quote: str) -> str:
    """Display form of a quoted span: gutters, footnote markers and line wrapping removed."""
    text = _GUTTER_RE.sub(" ", quote)
    text = _FOOTNOTE_RE.sub("", text)
    text = re.sub(r"\s+", " ", text).strip()
    text = _TRAILING_NOTE_RE.sub("", text)
    return re.sub(r"\s+([,.;:!?])", r"\1", text)


# a table row as the document readers write it (documents.row_sentence): "Label: Header value; Header value."
_TABLE_ROW_RE = re.compile(r"^[^:;\n]{1,100}: (?:[^;\n]+; )+[^;\n]+\.$|^[^:;\n]{1,100}: [^;\n]*\d[^;\n]*\.$")


def is_table_row(text: str) -> bool:
    """A table or sheet row read as a sentence ("Junior: Annual fee £60; Monthly fee £5."): short and mostly
    names, but it states the values of its row."""
    return bool(_TABLE_ROW_RE.match(" ".join(text.split())))


def is_declarative(text: str) -> bool:
    """A sentence that states something: long enough, mostly words, not a question, heading or boilerplate."""
    statement = clean_statement(text)
    tokens = words(statement)
    if not (MIN_SENTENCE_WORDS <= len(tokens) <= MAX_SENTENCE_WORDS):
        return False
    if statement.endswith("?") or _BOILERPLATE_RE.search(statement):
        return False
    if statement.endswith(":") and len(tokens) < LONG_LEAD_IN_WORDS:
        return False  # a short lead-in to a list ("Parameters:"); a long one states something itself
    if re.match(r"^[\w.]+\(.*\)$", statement) or re.match(r"^[\w.]+\s*=", statement):
        return False  # a code signature or an assignment, not prose
    symbols = sum(c in "(){}[]=*<>|\\/_`" for c in statement)
    if symbols > 0.08 * len(statement):
        return False
    letters = sum(c.isalpha() for c in statement)
    if letters < 0.6 * len(statement.replace(" ", "")):
        return False
    lowercase_words = sum(1 for t in tokens if t[:1].islower())
    if lowercase_words < 3:
        return False  # a title or a list of names
    commas = statement.count(",")
    if commas >= LIST_MIN_COMMAS and commas > LIST_COMMA_RATIO * len(tokens) and _bare_enumeration(statement):
        return False  # an enumeration ("Functions in x: a, b, c, ..."), not a statement
    return statement[-1] in ".!\"”')" or len(tokens) >= 8


def _bare_enumeration(statement: str) -> bool:
    """A list with no clause of its own: a label before a colon, or items with hardly a verb between them
    ("a, b, c, d and e"). A sentence that lists several names but also says something about them
    ("X, Y, Z, W and V founded the company in 1901, ...") is a statement."""
    if re.match(r"^[^,]{1,60}:\s", statement):
        return True
    items = [part.strip() for part in statement.split(",")]
    return sum(1 for item in items if len(words(item)) >= 4) < 2


def extraction_quality(statement: str) -> float:
    """How clean an extracted statement is, in [0, 1]: length, no hedging, a resolvable subject, a full stop."""
    tokens = words(statement)
    quality = 1.0
    if len(tokens) < 8:
        quality -= 0.2
    if len(tokens) > 50:
        quality -= 0.2
    if any(t.casefold() in _HEDGES for t in tokens):
        quality -= 0.2
    if _PRONOUN_START_RE.match(statement):
        quality -= 0.1
    if not statement.endswith((".", "!", '"', "”", ")")):
        quality -= 0.1
    return round(max(0.1, quality), 3)


def fact_subject(statement: str, title: str) -> str:
    """What the sentence is about: the document's subject for "She ..."/"It ...", else its first name."""
    document_subject = clean_title(title)
    if _PRONOUN_START_RE.match(statement) or _PRONOUN_AFTER_CLAUSE_RE.match(statement):
        return document_subject
    head = statement[: max(40, len(statement) // 2)]
    for mention in find_mentions(head):
        if mention.entity_type not in ("date", "number"):
            return mention.text
    return document_subject


@dataclass(frozen=True)
class ScoredSentence:
    sentence: Sentence
    statement: str
    relevance: float


def score_sentences(question: str, source: SourceResult) -> list[ScoredSentence]:
    """Every declarative sentence of the source with its relevance to the question (document order)."""
    profile = QuestionProfile.of(question)
    query_profile = QuestionProfile.of(source.query) if source.query else None
    title_stems = stem_set(clean_title(source.title))
    # a document whose title the question names (every word of the title is a question word) is about it
    about_question = 0.2 if title_stems and title_stems <= frozenset(profile.weights) else 0.0
    scored: list[ScoredSentence] = []
    title = clean_statement(source.title).rstrip(".").casefold()
    sentences = split_sentences(source.text())
    for sentence in sentences:
        if not (is_declarative(sentence.text) or is_table_row(sentence.text)) or is_instruction_like(sentence.text):
            continue  # questions, fragments, and words addressed to an assistant state no fact
        statement = clean_statement(sentence.text)
        if statement.rstrip(".").casefold() == title and len(sentences) > 1:
            continue  # the title line says what the document is about (unless it is the whole document)
        stems = frozenset(content_stems(statement))
        relevance = profile.coverage(stems, title_stems)
        if query_profile is not None:
            relevance = max(relevance, 0.8 * query_profile.coverage(stems, title_stems))
        relevance += 0.1 if sentence.index == 0 else 0.05 if sentence.index == 1 else 0.0
        relevance += about_question
        scored.append(ScoredSentence(sentence, statement, round(relevance, 4)))
    return scored


def extract_facts(
    question: str,
    source: SourceResult,
    iteration: int,
    *,
    max_facts: int = DEFAULT_MAX_FACTS_PER_SOURCE,
    min_relevance: float = DEFAULT_MIN_RELEVANCE,
) -> list[Fact]:
    """The source's most relevant declarative sentences as facts, best first (at most max_facts)."""
    scored = score_sentences(question, source)
    ranked = sorted(scored, key=lambda s: (-s.relevance, s.sentence.index))
    chosen: list[ScoredSentence] = [s for s in ranked if s.relevance >= min_relevance][:max_facts]
    lead = next((s for s in scored if s.sentence.index <= 1), None)
    if lead is not None and lead not in chosen and len(chosen) < max_facts + 1 and lead.relevance > 0.1:
        chosen.append(lead)  # the defining sentence of a document is worth keeping
    facts: dict[str, Fact] = {}
    for item in chosen:
        fact_id = Fact.make_id(item.statement)
        if fact_id in facts:
            continue
        facts[fact_id] = Fact(
            id=fact_id,
            statement=item.statement,
            evidence=[Evidence(source_url=source.url, quote=item.sentence.text)],
            subject=fact_subject(item.statement, source.title),
            confidence=round(0.3 + 0.2 * extraction_quality(item.statement), 3),
            iteration=iteration,
            relevance=item.relevance,
        )
    return list(facts.values())
