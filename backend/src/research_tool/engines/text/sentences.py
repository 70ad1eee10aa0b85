"""Sentence splitting that keeps exact offsets into the source text.

Every `Sentence.text` is `source[start:end]`, so a fact's quote is the source's own words. The splitter
survives abbreviations ("e.g.", "Dr.", "U.S."), initials ("J. R. R. Tolkien"), decimals and version
numbers ("3.11"), dotted code identifiers (`subprocess.run`), inline code and URLs; fenced code blocks
are skipped; blank lines, headings and list items always end a sentence.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

ABBREVIATIONS: frozenset[str] = frozenset(
    """
    mr mrs ms dr prof sr jr st mt ft vs e.g i.e eg ie inc ltd co corp no nos fig figs al approx dept est gen gov lt
    col sgt capt rev op cf ed eds vol vols pp jan feb mar apr jun jul aug sep sept oct nov dec u.s u.k u.n a.m p.m
    ph.d b.c a.d d.c n.y l.a ca c ibid viz
    """.split()
)

_FENCE_RE = re.compile(r"^[ \t]*(```|~~~).*?^[ \t]*\1[^\n]*$", re.MULTILINE | re.DOTALL)
_PROTECTED_RE = re.compile(r"`[^`\n]+`|https?://\S*[^\s.,;:!?)\]]|\b[\w.+-]+@[\w-]+\.[\w.]*\w")
_BOUNDARY_RE = re.compile(r"[.!?]+[\"'”’)\]]*(?=\s)")
_NEXT_START_RE = re.compile(r"\s+[\"'“‘(\[]?[A-Z0-9À-ÖØ-Þ]")
_BULLET_RE = re.compile(r"^[ \t]*(?:[-*•+]|\d{1,3}[.)])[ \t]+")
_BULLET_AT_RE = re.compile(r"(?:[-*•+]|\d{1,3}[.)])[ \t]+")
# "name: text" definition items (pydoc's "run(...): Runs a command") start a new block
_DEFINITION_RE = re.compile(r"^[ \t]*[\w.]+(?:\([^)]*\))?:[ \t]+\S")
# a code signature alone on its line ("__init__(self, x)", "class Popen(builtins.object)")
_SIGNATURE_RE = re.compile(r"^[ \t]*(?:class[ \t]+|def[ \t]+)?[\w.]+\(.*\)(?:[ \t]*->[^\n]*)?[ \t]*:?[ \t]*$")
_GUTTER_PREFIX_RE = re.compile(r"^[ \t]*\|(?:[ \t]|$)")
_HEADING_RE = re.compile(r"^[ \t]*(?:#{1,6}[ \t]|[=\-~^]{3,}[ \t]*$)")
_GUTTER_RE = re.compile(r"^[ \t]*\|?[ \t]*$")


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


def sentence_texts(text: str) -> list[str]:
    return [s.text for s in split_sentences(text)]


def _blocks(text: str) -> list[tuple[int, int]]:
    """Paragraph-like blocks: split at blank lines, headings, underlines and list items; code fences removed."""
    fenced = [(m.start(), m.end()) for m in _FENCE_RE.finditer(text)]
    blocks: list[tuple[int, int]] = []
    current_start: int | None = None
    pos = 0
    for line in text.splitlines(keepends=True):
        line_start, pos = pos, pos + len(line)
        in_fence = any(a <= line_start < b for a, b in fenced)
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
    protected = [(m.start(), m.end()) for m in _PROTECTED_RE.finditer(block)]
    spans: list[tuple[int, int]] = []
    sentence_start = 0
    for match in _BOUNDARY_RE.finditer(block):
        cut = match.end()
        if any(a < cut <= b for a, b in protected):
            continue
        if not _NEXT_START_RE.match(block, cut):
            continue
        if match.group(0)[0] == "." and _ends_with_abbreviation(block, match.start()):
            continue
        spans.append((start + sentence_start, start + cut))
        sentence_start = cut
    spans.append((start + sentence_start, end))
    return spans


def _ends_with_abbreviation(block: str, dot_index: int) -> bool:
    """True when the '.' at dot_index closes an abbreviation, an initial or a number, not a sentence."""
    head = block[:dot_index]
    token_match = re.search(r"([\w.]+)$", head)
    if not token_match:
        return False
    token = token_match.group(1)
    bare = token.casefold().strip(".")
    if bare in ABBREVIATIONS:
        return True
    if len(token) == 1 and token.isupper():
        return True  # an initial: "J. Smith"
    return re.fullmatch(r"(?:[A-Za-z]\.)+[A-Za-z]", token) is not None  # "U.S", "e.g", "Ph.D"


def _trim(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and text[start] in " \t\r\n|":
        start += 1
    while end > start and text[end - 1] in " \t\r\n|":
        end -= 1
    bullet = _BULLET_AT_RE.match(text, start, end)
    if bullet:
        start = bullet.end()
    return start, end
