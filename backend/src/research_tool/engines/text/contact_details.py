"""Contact details in text a model wrote (issue 22): a URL, e-mail address, phone number or street address that no
retrieved source holds is how injected text reaches a reader ("Call +1 555 0100 or visit http://evil.example").

`ContactGuard` is built from what the sources say (their urls, titles and text); `foreign(text)` lists the
details of `text` that none of them holds. Whoever takes free text from a model (the citation check for the
answer, findings, gaps and short answer; the LLM engine for reflection gaps, clarification and extracted facts
and entities) drops a piece of text that has any.

What counts (each compared in a normal form):
- URLs with a scheme or starting `www.`, and bare host names under a common top-level domain: known when the
  detail (lower case, without scheme, `www.` and trailing `/`) starts some known URL or host (`docs.python.org`
  is known from `https://docs.python.org/3/library/subprocess.html`);
- e-mail addresses: known when a source holds the same address;
- phone numbers (an international `+` form, a `(area) number` form, or 3-3-4 digit groups): known when a source
  holds a phone number with the same digits;
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
    """The contact details the sources hold; `foreign(text)` lists those of `text` that no source holds."""

    def __init__(self, texts: Iterable[str]) -> None:
        self._urls: set[str] = set()
        self._emails: set[str] = set()
        self._phones: set[str] = set()
        self._text = ""
        kept: list[str] = []
        for text in texts:
            if not text:
                continue
            kept.append(_words(text))
            for kind, detail in contact_details(text):
                if kind == "url":
                    self._urls.add(_url_key(detail))
                elif kind == "email":
                    self._emails.add(detail.lower())
                elif kind == "phone":
                    self._phones.add(_digits(detail))
        self._text = "\n".join(kept)

    def _known(self, kind: str, detail: str) -> bool:
        if kind == "url":
            key = _url_key(detail)
            return bool(key) and any(url.startswith(key) for url in self._urls)
        if kind == "email":
            return detail.lower() in self._emails
        if kind == "phone":
            return _digits(detail) in self._phones
        return _words(detail) in self._text

    def foreign(self, text: str) -> list[str]:
        """The contact details in `text` that no source holds (empty: nothing to object to)."""
        if not text:
            return []
        return [detail for kind, detail in contact_details(text) if not self._known(kind, detail)]

    def allows(self, text: str) -> bool:
        return not self.foreign(text)
