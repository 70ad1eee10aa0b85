"""Text from outside (search results, fetched pages, local documents, model output) made safe to store.

Every store must take what a source says: Postgres text and JSONB refuse NUL (0x00), and no UTF-8 encoder takes
a lone surrogate ("\\ud800" from a JSON escape). `clean_text` removes NUL and the other C0 control characters
except tab, newline and carriage return (and DEL), and replaces lone surrogates with U+FFFD. It is applied once,
where the text enters: `SourceResult`'s validators (every provider and the local corpus), the crawler's
`FetchedPage`, the local document readers, and the model's answers (engines/structured_output.py).
"""

from __future__ import annotations

import re
from typing import Any

# C0 controls but \t \n \r, DEL, and lone surrogates (which only a str built from escapes can hold).
_UNSAFE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ud800-\udfff]")
_CONTROLS: dict[int, None] = dict.fromkeys([*range(0x09), 0x0B, 0x0C, *range(0x0E, 0x20), 0x7F])


def clean_text(text: str) -> str:
    """`text` without C0 controls (tab, newline and carriage return kept) and with lone surrogates as U+FFFD."""
    if _UNSAFE.search(text) is None:  # the usual case: one scan, no copy
        return text
    text = text.translate(_CONTROLS)
    return _UNSAFE.sub("\ufffd", text)


def refuse_unsafe(text: str) -> str:
    """A caller's own text (a question, an answer) as is; ValueError when it holds a character `clean_text`
    would remove: a request is refused (422) rather than quietly changed or stored by one backend only."""
    found = _UNSAFE.search(text)
    if found is not None:
        raise ValueError(f"control character U+{ord(found.group()):04X} is not allowed in text")
    return text


def clean_value(value: Any) -> Any:
    """`clean_text` over every string in a JSON-like value (dicts, lists, tuples); other values unchanged."""
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, dict):
        return {clean_value(k): clean_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(clean_value(v) for v in value)
    return value
