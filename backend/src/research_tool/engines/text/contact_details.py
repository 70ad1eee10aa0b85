"""Contact details in text a model wrote (issue 22): a URL, e-mail address, phone number or street address that no
retrieved source holds is how injected text reaches a reader ("Call +1 555 0100 or visit http://evil.example").

`ContactGuard` is built from what the sources say (their urls, titles and text); `foreign(text)` lists the
details of `text` that none of them holds. Whoever takes free text from a model (the citation check for the
answer, findings, gaps and short answer; the LLM engine for reflection gaps, clarification and extracted facts
and entities) drops a piece of text that has any.

What counts (each compared in a normal form):
- URLs with a scheme or starting `www.`, and bare host names under a common top-level domain: known when a
  source holds the detail without its scheme, `www.` and trailing `/` (`docs.python.org` is known from
  `https://docs.python.org/3/library/subprocess.html`);
- e-mail addresses: known when a source holds the same address;
- phone numbers (an international `+` form, a `(area) number` form, or 3-3-4 digit groups): known when a source
  holds a number with the same digits (whatever separates them);
- street addresses ("221 Baker Street"): known when a source holds the same words.
Module and API names (`subprocess.run`, `os.path`) are not host names: their last part is no listed TLD.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

_TLDS = (
    "com|org|net|edu|gov|mil|int|io|co|info|biz|xyz|example|test|invalid|local|app|dev|me|ly|us|uk|de|fr|ru|cn|jp|"
    "in|br|au|ca|nl|eu|site|online|top|click|link|shop|store|live|tk|ml|ga|cf|gq|zip|mov|onion"
)
_URL = re.compile(r"(?i)\b(?:https?://|ftp://|www\.)[^\s<>\"'`)\]]+")
_EMAIL = re.compile(r"(?i)\b[a-z0-9._%+-]+@[a-z0-9.-]+\.[a-z]{2,}\b")
_HOST = re.compile(rf"(?i)(?<![\w@./-])(?:[a-z0-9](?:[a-z0-9-]*[a-z0-9])?\.)+(?:{_TLDS})\b(?:/[^\s<>\"'`)\]]*)?")
_PHONE = re.compile(
    r"(?<![\w+])(?:\+\d{1,3}[\s.-]?(?:\(\d{1,4}\)[\s.-]?)?\d{1,4}(?:[\s.-]\d{2,5}){1,4}"
    r"|\(\d{2,4}\)\s?\d{3,4}[\s.-]\d{3,4}"
    r"|\d{3}[\s.-]\d{3}[\s.-]\d{4})(?![\w])"
)
_STREET = re.compile(
    r"\b\d{1,5}\s+(?:[A-Z][a-z]+\s+){1,3}"
    r"(?:Street|St|Avenue|Ave|Road|Rd|Boulevard|Blvd|Lane|Ln|Drive|Dr|Way|Court|Ct|Place|Pl|Square|Sq|Highway|Hwy)\b"
)
_TRAILING = ".,;:!?'\")]}/"


def _url_key(url: str) -> str:
    key = re.sub(r"(?i)^(?:https?|ftp)://", "", url.strip().rstrip(_TRAILING)).lower()
    return key.removeprefix("www.").rstrip("/")


def _digits(text: str) -> str:
    return re.sub(r"\D", "", text)


def _words(text: str) -> str:
    return " ".join(text.lower().split())


def contact_details(text: str) -> list[tuple[str, str]]:
    """(kind, detail) for every URL, host name, e-mail address, phone number and street address in `text`."""
    found: list[tuple[str, str]] = []
    emails = [m.group(0) for m in _EMAIL.finditer(text)]
    found += [("email", e) for e in emails]
    without_emails = _EMAIL.sub(" ", text)
    urls = [m.group(0).rstrip(".,;:!?'\")]}") for m in _URL.finditer(without_emails)]
    found += [("url", u) for u in urls]
    found += [("url", m.group(0).rstrip(".,;:!?'\")]}")) for m in _HOST.finditer(_URL.sub(" ", without_emails))]
    found += [("phone", m.group(0)) for m in _PHONE.finditer(text)]
    found += [("address", m.group(0)) for m in _STREET.finditer(text)]
    return found


class ContactGuard:
    """What the sources say, to tell which contact details of a model's text none of them holds.

    Only the model's text is searched for details (it is short); each one is then looked up in the sources'
    text in a normal form (substring searches), so building a guard over a session's sources is one pass of
    lower-casing, not five expressions over megabytes."""

    def __init__(self, texts: Iterable[str]) -> None:
        self._lower = "\n".join(text.lower() for text in texts if text)
        self._flat: str | None = None

    def _known(self, kind: str, detail: str) -> bool:
        if kind == "url":
            key = _url_key(detail)
            return bool(key) and key in self._lower
        if kind == "email":
            return detail.lower() in self._lower
        if kind == "phone":  # the same digits, whatever separates them: "+44 20 7946-0958" ~ "(20) 7946 0958"
            pattern = re.compile("[\\s.()+-]*".join(_digits(detail)))
            text = self._lower
            return any(
                (m.start() == 0 or not text[m.start() - 1].isdigit())
                and (m.end() == len(text) or not text[m.end()].isdigit())
                for m in pattern.finditer(text)
            )
        if self._flat is None:
            self._flat = _words(self._lower)
        return _words(detail) in self._flat

    def foreign(self, text: str) -> list[str]:
        """The contact details in `text` that no source holds (empty: nothing to object to)."""
        if not text:
            return []
        return [detail for kind, detail in contact_details(text) if not self._known(kind, detail)]

    def allows(self, text: str) -> bool:
        return not self.foreign(text)
