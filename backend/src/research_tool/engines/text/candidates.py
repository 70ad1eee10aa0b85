"""Answer candidates: every declarative sentence of every citable source, with what the ranker reads
around it (its page's title, the sentence it refers back to), and a how-to page's call signature."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from research_tool.engines.base import NumberedSource
from research_tool.engines.text.entities import clean_title
from research_tool.engines.text.facts import clean_statement, is_declarative, is_table_row
from research_tool.engines.text.instructions import is_instruction_like
from research_tool.engines.text.sentences import split_sentences
from research_tool.engines.text.tokens import content_stems, stem_set
from research_tool.models.entities import normalize_key

MAX_SENTENCES_PER_SOURCE = 300
MAX_SIGNATURE_CHARS = 400
MAX_BEFORE_CHARS = (
    300  # of the sentence before, for the reader's context  # a longer "signature" line is no call signature
)

_HEADING_RE = re.compile(r"^#{1,6}\s")  # a markdown heading (and an html one, written so): never a statement
_PRONOUN_RE = re.compile(r"^(?:he|she|it|they|his|her|its|their)\b", re.IGNORECASE)
# "this notion", "these proteins", "such funding" (not "such as"): the sentence refers back to the one before
_DEMONSTRATIVE_RE = re.compile(r"^(?:this|these|such)\b|\b(?:this|these)\s+[a-z]|\bsuch\s+(?!as\b)[a-z]", re.IGNORECASE)
# a call signature alone on its line, or opening a module summary's line ("urlopen(url, data=None) -- Basic usage")
_SIGNATURE_RE = re.compile(
    r"^[ \t]*((?:class[ \t]+)?[A-Za-z_][\w.]*\([^\n]*?\))(?:[ \t]+--[ \t][^\n]*)?[ \t]*$", re.MULTILINE
)


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
    lexical_share: float = 0.0  # the lexical ranker's share, kept when the reader's mix replaces `share`
    reading: float = 0.0  # the answer reader's probability that it answers the question (0: not read)
    features: dict[str, float] = field(default_factory=dict)
    terms: tuple[str, ...] = ()  # stemmed content words in order
    filler: str | None = None
    link: Candidate | None = None  # the sentence that named this one's page (second hop)
    bridge: bool = False  # this sentence names another page of the pool
    names_new: bool = False  # it names something the question does not
    signature: bool = False
    before: str = ""  # the sentence standing before it in its document (any kind: a heading, a lead-in)
    title: str = ""  # its page's title

    @property
    def reader_context(self) -> str:
        """What the answer reader reads beside the sentence: "Title: the sentence before"."""
        return f"{self.title}: {self.before}" if self.before else self.title

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
        before = ""
        for sentence in split_sentences(text)[:MAX_SENTENCES_PER_SOURCE]:
            said_before, before = before, " ".join(sentence.text.split()).lstrip("# ")[:MAX_BEFORE_CHARS]
            if not _is_statement(sentence.text):
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
            candidate.before, candidate.title = said_before, title
            candidates.append(candidate)
            previous = candidate
        signature = None
        match = next(
            (m for m in _SIGNATURE_RE.finditer(text[:3000]) if _one_call(m.group(1)) and _declares(m.group(1))), None
        )
        if match and len(match.group(1)) <= MAX_SIGNATURE_CHARS:
            line = match.group(1).strip()
            signature = Candidate(
                numbered.n, source.url, line, -1, frozenset(content_stems(line)), title_stems, signature=True
            )
        docs.append(SourceDoc(numbered.n, source.url, title, normalize_key(title), title_stems, candidates, signature))
    return docs


def _is_statement(text: str) -> bool:
    """A sentence an answer may quote: declarative, no instruction to the reader, no heading, and no lead-in to
    what follows (a line ending in ":" states nothing yet, however long)."""
    if _HEADING_RE.match(text) or text.rstrip().endswith(":"):
        return False
    if is_table_row(text):
        return True  # a table row read as a sentence ("Adult: Price £9.50."): short, but it states a value
    return is_declarative(text) and not is_instruction_like(text)


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


# one parameter of a signature: a name (with a type or a default), *args, **kwargs, a bare * or /, "...", or an
# optional part in brackets ("[, flags]"); a literal or a tuple in its place makes the line a call, not a signature
_PARAMETER_RE = re.compile(r"^(?:\*{0,2}[A-Za-z_]\w*(?:\s*:[^=]+)?(?:\s*=.+)?|\*|/|\.\.\.|\[.*\]?|.*\])$", re.DOTALL)


def _declares(line: str) -> bool:
    """A call signature declares parameters ("run(args, *, timeout=None)"); a usage example passes values
    (`store.set(("invoice", 881), data)`), which answers no how-to question by its name alone."""
    inner = line[line.index("(") + 1 : line.rindex(")")].strip()
    parts, depth, start = [], 0, 0
    for i, char in enumerate(inner):
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
        elif char == "," and depth == 0:
            parts.append(inner[start:i])
            start = i + 1
    parts.append(inner[start:])
    return all(_PARAMETER_RE.match(p.strip()) for p in parts if p.strip())


def _acronyms(title: str) -> frozenset[str]:
    """The initials of a title's capitalised words ("Intergovernmental Panel on Climate Change" -> "ipcc"):
    a question may name the page's subject by its abbreviation."""
    initials = "".join(w[0] for w in title.split() if w[:1].isupper()).casefold()
    return frozenset([initials]) if len(initials) >= 2 else frozenset()
