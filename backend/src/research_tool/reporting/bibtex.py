"""The report's sources as BibTeX entries that any BibTeX parser reads back.

BibTeX delimits a field by counting braces and ignores backslashes while it counts, so `\\{` still
opens a group: one unmatched brace in a title (`Sets {a, b`) ran the entry into the next. Braces
that pair up inside a string are kept as `\\{...\\}`; an unmatched one is written as
`\\textbraceleft{}` / `\\textbraceright{}`, so every field is balanced whatever a source holds.
"""

from __future__ import annotations

import re
import unicodedata

from research_tool.models.entities import Citation
from research_tool.models.report import Report
from research_tool.reporting.text import one_line

_BIB_SPECIALS: dict[str, str] = {
    "\\": r"\textbackslash{}",
    "$": r"\$",
    "&": r"\&",
    "#": r"\#",
    "%": r"\%",
    "_": r"\_",
    "^": r"\textasciicircum{}",
    "~": r"\textasciitilde{}",
    "<": r"\textless{}",
    ">": r"\textgreater{}",
}
_UNMATCHED_BRACE = {"{": r"\textbraceleft{}", "}": r"\textbraceright{}"}


def _matched_braces(text: str) -> set[int]:
    """Positions of the braces in `text` that pair up (an opening one with a later closing one)."""
    open_at: list[int] = []
    matched: set[int] = set()
    for index, ch in enumerate(text):
        if ch == "{":
            open_at.append(index)
        elif ch == "}" and open_at:
            matched.update((open_at.pop(), index))
    return matched


def bib_escape(text: str) -> str:
    """TeX-safe, brace-balanced text for a BibTeX field (specials escaped, whitespace collapsed)."""
    text = one_line(text)
    matched = _matched_braces(text)
    out: list[str] = []
    for index, ch in enumerate(text):
        if ch in "{}":
            out.append("\\" + ch if index in matched else _UNMATCHED_BRACE[ch])
        else:
            out.append(_BIB_SPECIALS.get(ch, ch))
    return "".join(out)


def _bib_verbatim(value: str) -> str:
    """A url or doi: no TeX escaping (url/doi fields are verbatim), but braces, backslashes and
    spaces, which would break the entry, are percent-encoded."""
    return "".join({"{": "%7B", "}": "%7D", "\\": "%5C", " ": "%20"}.get(ch, ch) for ch in one_line(value))


def _ascii_word(text: str) -> str:
    folded = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    return re.sub(r"[^A-Za-z0-9]", "", folded)


_KEY_STOPWORDS = frozenset({"a", "an", "the", "of", "on", "in", "and", "for", "to", "with", "how", "what"})


def _bib_base_key(citation: Citation) -> str:
    surname = ""
    if citation.authors:
        first = citation.authors[0].strip()
        surname = first.split(",")[0] if "," in first else (first.split() or [""])[-1]
    title_word = next(
        (
            w
            for w in (_ascii_word(t) for t in re.split(r"[\s/]+", citation.title))
            if w and w.lower() not in _KEY_STOPWORDS
        ),
        "",
    )
    key = _ascii_word(surname).lower() + (str(citation.year) if citation.year else "") + title_word.lower()[:20]
    return key or "ref" + (_ascii_word(citation.id) or "0")


def bib_keys(citations: list[Citation]) -> list[str]:
    """Stable, unique keys in citation order: `<surname><year><titleword>`, then a, b, c... on clashes."""
    bases = [_bib_base_key(c) for c in citations]
    counts: dict[str, int] = {}
    for base in bases:
        counts[base] = counts.get(base, 0) + 1
    used: set[str] = set()
    keys: list[str] = []
    suffixes: dict[str, int] = {}
    for base in bases:
        if counts[base] == 1 and base not in used:
            key = base
        else:
            n = suffixes.get(base, 0)
            while True:
                key = base + _letter_suffix(n)
                n += 1
                if key not in used and key not in counts:
                    break
            suffixes[base] = n
        used.add(key)
        keys.append(key)
    return keys


def _letter_suffix(n: int) -> str:
    letters = ""
    n += 1
    while n:
        n, rem = divmod(n - 1, 26)
        letters = chr(ord("a") + rem) + letters
    return letters


def _bib_entry(key: str, citation: Citation) -> str:
    entry_type = "article" if citation.doi or citation.type == "academic" else "misc"
    fields: list[tuple[str, str]] = [("title", "{" + bib_escape(citation.title) + "}")]
    if citation.authors:
        fields.append(("author", " and ".join(bib_escape(a) for a in citation.authors if a.strip())))
    if citation.year:
        fields.append(("year", str(citation.year)))
    if citation.doi:
        fields.append(("doi", _bib_verbatim(citation.doi)))
    if citation.url:
        fields.append(("url", _bib_verbatim(citation.url)))
    if citation.retrieved_at:
        fields.append(("urldate", bib_escape(citation.retrieved_at[:10])))
    note = f"Cited as {citation.id}; {citation.type} source via {citation.provider}"
    if citation.location:
        note += f"; location: {citation.location}"
    fields.append(("note", bib_escape(note)))
    body = ",\n".join(f"  {name} = {{{value}}}" for name, value in fields)
    return f"@{entry_type}{{{key},\n{body}\n}}\n"


def render_bib(report: Report) -> str:
    # Text outside entries is a comment to BibTeX, except that "@" would open an entry.
    about = bib_escape(f"{report.session_id}: {report.query}").replace("@", "(at)")
    header = f"% Sources of research session {about}\n"
    keys = bib_keys(report.citations)
    return header + "\n" + "\n".join(_bib_entry(k, c) for k, c in zip(keys, report.citations, strict=True))
