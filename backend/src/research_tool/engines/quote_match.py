"""Find a model's quote in the source it claims to quote, and return the source's own span.

Models copy quotes with small drift: collapsed whitespace, straight instead of curly quotes, different
case, a trailing ellipsis. Matching ignores exactly those differences and nothing else, so a fact's evidence is
always a real span of the retrieved text (the source's characters, not the model's), or the fact is dropped.
"""

from __future__ import annotations

_EQUIVALENT = str.maketrans(
    {"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"', "\u2013": "-", "\u2014": "-", "\u00a0": " "}
)
_TRIM = " .…\"'"
MIN_QUOTE_CHARS = 8


def _normalize_with_positions(text: str) -> tuple[str, list[int]]:
    """Whitespace runs become one space, punctuation variants unify, case folds; each output character
    remembers the index of the input character it came from."""
    chars: list[str] = []
    positions: list[int] = []
    previous_space = True  # drops leading whitespace
    for index, char in enumerate(text.translate(_EQUIVALENT)):
        if char.isspace():
            if previous_space:
                continue
            chars.append(" ")
            positions.append(index)
            previous_space = True
            continue
        previous_space = False
        for lowered in char.lower():
            chars.append(lowered)
            positions.append(index)
    return "".join(chars), positions


def find_quote(source_text: str, quote: str) -> str | None:
    """The span of `source_text` that `quote` reproduces, or None when the source does not contain it."""
    needle, _ = _normalize_with_positions(quote)
    needle = needle.strip(_TRIM)
    if len(needle) < MIN_QUOTE_CHARS:
        return None
    haystack, positions = _normalize_with_positions(source_text)
    start = haystack.find(needle)
    if start < 0:
        return None
    first = positions[start]
    last = positions[start + len(needle) - 1]
    return source_text[first : last + 1]
