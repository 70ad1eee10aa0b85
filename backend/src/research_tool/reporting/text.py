"""Plain-text hygiene shared by every export format: control characters out, whitespace collapsed.

Text in a report comes from sources and models, so it may hold NUL, ESC (terminal escape sequences),
other C0/C1 control characters or bidi overrides that make a line read differently from what it
holds. They carry no meaning in a report and are dropped before any format-specific escaping.
"""

from __future__ import annotations

import re

# C0 controls except tab and newline, DEL, C1 controls, and the bidi embedding/override/isolate marks.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_WHITESPACE = re.compile(r"\s+")
_CARRIAGE_RETURN = re.compile(r"\r\n?")


def clean_text(text: str) -> str:
    """`text` without control characters (tab and newline are kept; CR and CRLF become newlines)."""
    return _CONTROL.sub("", _CARRIAGE_RETURN.sub("\n", text))


def one_line(text: str) -> str:
    """`text` cleaned, on one line, with runs of whitespace collapsed to one space."""
    return _WHITESPACE.sub(" ", clean_text(text)).strip()
