"""A long page cut into passages (its paragraphs), and the best of them kept within a character budget (in page order).

An engine that reads only part of a page (the LLM engine shows its model `LLMLimits.max_source_chars`) keeps the
page's first characters. With the `semantic` extra, graph/nodes/page_focus.py scores these passages against the
question and keeps the best instead (measured in docs/semantic-search.md, "Web pages").
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from research_tool.engines.text.sentences import split_sentences

PASSAGE_WORDS = 120  # a paragraph above this many words becomes windows of whole sentences
PASSAGE_SEPARATOR = "\n\n"
# A paragraph ends at a line break: the crawler's text (trafilatura) puts one paragraph a line, Markdown and plain
# text a blank line between paragraphs.
_BLOCK_RE = re.compile(r"[ \t]*\n\s*")

Span = tuple[int, int]


def cut_passages(text: str, max_words: int = PASSAGE_WORDS) -> list[Span]:
    """The text's paragraphs (lines) as (start, end) spans; a paragraph above max_words words becomes consecutive
    windows of whole sentences of at most max_words words (a longer sentence is a window of its own)."""
    passages: list[Span] = []
    start = 0
    for match in [*_BLOCK_RE.finditer(text), None]:
        end = match.start() if match else len(text)
        block = text[start:end]
        if block.strip():
            if len(block.split()) <= max_words:
                passages.append(_trimmed(text, start, end))
            else:
                passages.extend(_sentence_windows(block, start, max_words))
        if match:
            start = match.end()
    return passages


def _trimmed(text: str, start: int, end: int) -> Span:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def _sentence_windows(block: str, offset: int, max_words: int) -> list[Span]:
    windows: list[Span] = []
    window: Span | None = None
    words_in = 0
    for sentence in split_sentences(block):
        count = len(sentence.text.split())
        if window is not None and words_in + count > max_words:
            windows.append(window)
            window, words_in = None, 0
        start, end = offset + sentence.start, offset + sentence.end
        window = (window[0], end) if window else (start, end)
        words_in += count
    if window is not None:
        windows.append(window)
    return windows


def best_within(passages: Sequence[Span], scores: Sequence[float], budget: int) -> list[Span]:
    """The best-scored passages whose lengths (plus a separator each) fit the budget, in page order; ties go to
    the earlier passage, and a passage too long for what is left is skipped for the next one that fits."""
    order = sorted(range(len(passages)), key=lambda i: (-scores[i], i))
    kept: list[int] = []
    used = 0
    for i in order:
        size = passages[i][1] - passages[i][0] + len(PASSAGE_SEPARATOR)
        if used + size <= budget:
            kept.append(i)
            used += size
    return [passages[i] for i in sorted(kept)]


def joined(text: str, spans: Sequence[Span]) -> str:
    """The kept passages' text, separated by blank lines (each passage is the page's own words)."""
    return PASSAGE_SEPARATOR.join(text[start:end] for start, end in spans)
