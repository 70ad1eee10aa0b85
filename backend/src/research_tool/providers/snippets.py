"""Plain text from the HTML fragments providers put in titles and snippets."""

from __future__ import annotations

import html
import re

from research_tool.core.untrusted_text import clean_text

_TAG = re.compile(r"<[^>]+>")
_SPACE = re.compile(r"\s+")


def plain_text(fragment: str | None) -> str:
    """`A <strong>bold</strong> &quot;claim&quot;` -> `A bold "claim"`, whitespace collapsed, control characters
    removed (`&#0;` unescapes to one)."""
    if not fragment:
        return ""
    return _SPACE.sub(" ", clean_text(html.unescape(_TAG.sub("", fragment)))).strip()
