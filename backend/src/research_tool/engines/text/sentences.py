"""Sentence splitting that keeps exact offsets into the source text.

Every `Sentence.text` is `source[start:end]`, so a fact's quote is the source's own words. The splitter
survives abbreviations ("e.g.", "Dr.", "U.S."), initials ("J. R. R. Tolkien"), decimals and version
numbers ("3.11"), dotted code identifiers (`subprocess.run`), inline code and URLs; fenced code blocks
are skipped; blank lines, headings and list items always end a sentence.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from dataclasses import dataclass

ABBREVIATIONS: frozenset[str] = frozenset(
    """
    mr mrs ms dr prof sr jr st mt ft vs e.g i.e eg ie inc ltd co corp no nos fig figs al approx dept est gen gov lt
    col sgt capt rev op cf ed eds vol vols pp jan feb mar apr jun jul aug sep sept oct nov dec u.s u.k u.n a.m p.m
    ph.d b.c a.d d.c n.y l.a ca c ibid viz
    """.split()
)

_FENCE_RE = re.compile(r"^[ \t]*(```|~~~).*?^[ \t]*\1[^\n]*$", re.MULTILINE | re.DOTALL)
# Spans a full stop inside never ends a sentence: inline code, URLs, e-mail addresses. Each pattern runs only
# when its marker occurs in the block; the e-mail pattern starts only where a token starts and bounds the
# local part, so a long dotted token costs one pass, not one per word boundary inside it.
_PROTECTED_PATTERNS = (
    ("`", re.compile(r"`[^`\n]+`")),
    ("://", re.compile(r"https?://\S*[^\s.,;:!?)\]]")),
    ("@", re.compile(r"(?<![\w.+-])[\w.+-]{1,64}@[\w-]+\.[\w.]*\w")),
)
# A full stop (or ! ?), closing quotes or brackets, footnote markers ("[3]", "[citation needed]", "[note 2]"),
# then space and a capital, digit or opening quote: a candidate sentence end, found in one regex pass (the
# next-start check is the lookahead). A footnote after the full stop belongs to the sentence it closes.
_BOUNDARY_RE = re.compile(
    r"[.!?]+[\"'”’)\]]*(?:\[(?:\d{1,4}|[a-z]|citation needed|note \d{1,3}|[a-z][a-z ]{2,18}\??)\])*"
    r"(?=\s+[\"'“‘(\[]?[A-Z0-9À-ÖØ-Þ])"
)
_BULLET_RE = re.compile(r"^[ \t]*(?:[-*•+]|\d{1,3}[.)])[ \t]+")
_BULLET_AT_RE = re.compile(r"(?:[-*•+]|\d{1,3}[.)])[ \t]+")
# "name: text" definition items (pydoc's "run(...): Runs a command") start a new block
_DEFINITION_RE = re.compile(r"^[ \t]*[\w.]+(?:\([^)]*\))?:[ \t]+\S")
# a code signature alone on its line ("__init__(self, x)", "class Popen(builtins.object)")
_SIGNATURE_RE = re.compile(r"^[ \t]*(?:class[ \t]+|def[ \t]+)?[\w.]+\(.*\)(?:[ \t]*->[^\n]*)?[ \t]*:?[ \t]*$")
_GUTTER_PREFIX_RE = re.compile(r"^[ \t]*\|(?:[ \t]|$)")
_HEADING_RE = re.compile(r"^[ \t]*(?:#{1,6}[ \t]|[=\-~^]{3,}[ \t]*$)")
_GUTTER_RE = re.compile(r"^[ \t]*\|?[ \t]*$")
_MAX_ABBREVIATION_CHARS = 24  # longer than "Ph.D", "e.g" or a chain of initials ("J.R.R") ever is
_TOKEN_TAIL_RE = re.compile(r"[\w.]+$")
_DOTTED_INITIALS_RE = re.compile(r"(?:[A-Za-z]\.)+[A-Za-z]")


@dataclass(frozen=True)
class Sentence:
    text: str  # exactly source[start:end]
    start: int
    end: int
    index: int  # order in the document (0 = first sentence)


def split_sentences(text: str) -> list[Sentence]:
    """Sentences of `text` in order, with exact offsets; empty pieces dropped."""
    spans: list[tuple[int, int]] = []
    for block_start, block_end in _blocks(text):
        spans.extend(_split_block(text, block_start, block_end))
    sentences: list[Sentence] = []
    for start, end in spans:
        start, end = _trim(text, start, end)
        if end - start >= 2:
            sentences.append(Sentence(text=text[start:end], start=start, end=end, index=len(sentences)))
    return sentences


def _blocks(text: str) -> list[tuple[int, int]]:
    """Paragraph-like blocks: split at blank lines, headings, underlines and list items; code fences removed."""
    fenced = [(m.start(), m.end()) for m in _FENCE_RE.finditer(text)]
    fence = 0  # the first fence that does not end before the current line (lines come in order)
    blocks: list[tuple[int, int]] = []
    current_start: int | None = None
    pos = 0
    for line in text.splitlines(keepends=True):
        line_start, pos = pos, pos + len(line)
        while fence < len(fenced) and fenced[fence][1] <= line_start:
            fence += 1
        in_fence = fence < len(fenced) and fenced[fence][0] <= line_start
        body = _GUTTER_PREFIX_RE.sub("", line.rstrip("\r\n"))
        if in_fence or _GUTTER_RE.match(body) or _HEADING_RE.match(body):
            if current_start is not None:
                blocks.append((current_start, line_start))
                current_start = None
            if not in_fence and _HEADING_RE.match(body) and body.lstrip().startswith("#"):
                blocks.append((line_start, pos))  # a markdown heading is its own (non-sentence) block
            continue
        if _BULLET_RE.match(body) or _DEFINITION_RE.match(body) or _is_title_line(body):
            if current_start is not None:
                blocks.append((current_start, line_start))
            current_start = line_start
            if _is_title_line(body):
                blocks.append((line_start, pos))
                current_start = None
            continue
        if current_start is None:
            current_start = line_start
    if current_start is not None:
        blocks.append((current_start, len(text)))
    return blocks


def _is_title_line(line: str) -> bool:
    """An ALL-CAPS line such as pydoc's "DESCRIPTION" or "MODULE REFERENCE"."""
    stripped = line.strip()
    if (
        _SIGNATURE_RE.match(stripped)
        and "): " not in stripped
        and " " not in stripped.split("(", 1)[0].removeprefix("class ")
    ):
        return True
    return 2 < len(stripped) < 60 and stripped.isupper() and not stripped.endswith((".", ",", ";"))


def _split_block(text: str, start: int, end: int) -> list[tuple[int, int]]:
    block = text[start:end]
    protected = _protected_spans(block)
    protected_ends = [b for _, b in protected]
    spans: list[tuple[int, int]] = []
    sentence_start = 0
    for match in _BOUNDARY_RE.finditer(block):
        cut = match.end()
        if protected:
            inside = bisect_left(protected_ends, cut)  # the first protected span ending at or after the cut
            if inside < len(protected) and protected[inside][0] < cut:
                continue
        if match.group(0)[0] == "." and _ends_with_abbreviation(block, match.start()):
            continue
        spans.append((start + sentence_start, start + cut))
        sentence_start = cut
    spans.append((start + sentence_start, end))
    return spans


def _protected_spans(block: str) -> list[tuple[int, int]]:
    """Code, URL and e-mail spans of the block, sorted and merged where they overlap."""
    spans = sorted(
        (m.start(), m.end())
        for marker, pattern in _PROTECTED_PATTERNS
        if marker in block
        for m in pattern.finditer(block)
    )
    merged: list[tuple[int, int]] = []
    for a, b in spans:
        if merged and a < merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], b))
        else:
            merged.append((a, b))
    return merged


def _token_before(block: str, end: int) -> str:
    """The run of word characters and dots that ends at `end`, looked for in the `_MAX_ABBREVIATION_CHARS + 1`
    characters before it only: the cost per full stop is constant, never the text before it."""
    found = _TOKEN_TAIL_RE.search(block, max(0, end - _MAX_ABBREVIATION_CHARS - 1), end)
    return found.group(0) if found else ""


def _ends_with_abbreviation(block: str, dot_index: int) -> bool:
    """True when the '.' at dot_index closes an abbreviation, an initial or a number, not a sentence."""
    token = _token_before(block, dot_index)
    if not token or len(token) > _MAX_ABBREVIATION_CHARS:
        return False  # no token, or one longer than any abbreviation or chain of initials
    bare = token.casefold().strip(".")
    if bare in ABBREVIATIONS:
        return True
    if len(token) == 1 and token.isupper():
        return True  # an initial: "J. Smith"
    return _DOTTED_INITIALS_RE.fullmatch(token) is not None  # "U.S", "e.g", "Ph.D"


def _trim(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and text[start] in " \t\r\n|":
        start += 1
    while end > start and text[end - 1] in " \t\r\n|":
        end -= 1
    bullet = _BULLET_AT_RE.match(text, start, end)
    if bullet:
        start = bullet.end()
    return start, end
