"""The report as CommonMark. Text from sources is inert: it can print, never become markup.

`md_escape` backslash-escapes every character that could start markup where it stands: always the
backslash, backtick, `*`, `<`, `[`, `]`, `~`, and `!` before `[`; `_` unless it sits inside a word;
`&` that would start an entity; a trailing ` #` (it would close a heading); and at the start of a
block the characters that open headings, quotes, lists and setext underlines (`#`, `>`, `+`, `-`, `=`,
`1.`, `1)`). So a source holding `\\<img src=x onerror=...>` or `![p](http://...)` shows those characters
and nothing else. Only links the report itself makes (a source's http(s)/file url, its doi) are links.
"""

from __future__ import annotations

import re
import string
import unicodedata

from research_tool.reporting.document import (
    BulletList,
    Code,
    Emph,
    Inline,
    Inlines,
    ListItem,
    Note,
    OrderedList,
    Paragraph,
    ReportDocument,
    SourceList,
    Strong,
    Table,
    Text,
)
from research_tool.reporting.text import clean_text, one_line

_ALWAYS = frozenset("\\`*<[]~")
# A plain [n]: not an inline link "[n](" nor a definition "[n]:". "[1][2]" stays too: a reference link needs a
# definition, and none can exist (every other "[" and "]" is escaped).
_KEPT_MARKER = re.compile(r"\[\d{1,6}\](?![(:])")
_ENTITY = re.compile(r"&(?:#[0-9]{1,7}|#[xX][0-9A-Fa-f]{1,6}|[A-Za-z][A-Za-z0-9]{0,31});")
_BLOCK_OPENER = re.compile(r"^( *)([#>+=-])")
_ORDERED_OPENER = re.compile(r"^( *\d{1,9})([.)])(?=\s|$)")
_WHITESPACE = re.compile(r"\s+")
_CLOSING_HASHES = re.compile(r"(?<= )(#+)( *)$")  # would close an ATX heading and vanish
_DESTINATION_UNSAFE = frozenset(" ()<>\\`\"'")


def _is_space(ch: str) -> bool:
    return ch.isspace()


def _is_punctuation(ch: str, *, symbols: bool) -> bool:
    category = unicodedata.category(ch)
    return ch in string.punctuation or category.startswith("P") or (symbols and category.startswith("S"))


def _may_close_emphasis(text: str, start: int, end: int) -> bool:
    """Whether the `*`/`_` run text[start:end] is right-flanking (CommonMark), so could close emphasis. Unknown
    neighbours count the way that says yes: a letter before the text, a space after it; and a neighbour
    counts as punctuation before the run only in the narrow sense, after it in the wide one."""
    before = text[start - 1] if start > 0 else "a"
    after = text[end] if end < len(text) else " "
    if _is_space(before):
        return False
    return not _is_punctuation(before, symbols=False) or _is_space(after) or _is_punctuation(after, symbols=True)


def md_escape(text: str, *, markers: bool = False, prose: bool = False) -> str:
    """One line of untrusted text as inert CommonMark. With `markers`, plain `[n]` stay readable.

    With `prose` (text whose own emphasis was taken out as nodes, `document.inline_markup`), a `*` or `_` run
    is escaped only where it could close emphasis, so `run(*args, **kwargs)` reads as written; a run that can
    only open finds no closer (every one from the text is escaped, and the report's own pair up first).
    Whitespace runs become one space (so no line can start inside the text), kept at either end so
    that separators such as " — " survive.
    """
    text = _WHITESPACE.sub(" ", clean_text(text))
    out: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if markers and ch == "[":
            kept = _KEPT_MARKER.match(text, i)
            if kept:
                out.append(kept.group(0))
                i = kept.end()
                continue
        if prose and ch in "*_":
            end = i
            while end < len(text) and text[end] == ch:
                end += 1
            run = text[i:end]
            intraword = ch == "_" and i > 0 and end < len(text) and text[i - 1].isalnum() and text[end].isalnum()
            closes = not intraword and _may_close_emphasis(text, i, end)
            out.append(run.replace(ch, "\\" + ch) if closes else run)
            i = end
            continue
        if ch in _ALWAYS or (ch == "!" and text.startswith("[", i + 1)) or (ch == "&" and _ENTITY.match(text, i)):
            out.append("\\" + ch)
        elif ch == "_" and not (0 < i < len(text) - 1 and text[i - 1].isalnum() and text[i + 1].isalnum()):
            out.append("\\_")
        else:
            out.append(ch)
        i += 1
    escaped = "".join(out)
    escaped = _CLOSING_HASHES.sub(r"\\\1\2", escaped)
    escaped = _ORDERED_OPENER.sub(r"\1\\\2", escaped)
    return _BLOCK_OPENER.sub(r"\1\\\2", escaped)


def md_link_destination(url: str) -> str:
    """A link target with nothing that could end or escape it (percent-encoded)."""
    return "".join(
        f"%{ord(ch):02X}" if ch in _DESTINATION_UNSAFE or ord(ch) < 0x20 or ord(ch) == 0x7F else ch
        for ch in clean_text(url).strip()
    )


def _code_span(text: str) -> str:
    return "`" + one_line(text).replace("`", "'") + "`"


def _inline(node: Inline) -> str:
    if isinstance(node, Text):
        return md_escape(node.text, markers=node.markers, prose=node.prose)
    if isinstance(node, Emph):
        return f"*{_inlines(node.children)}*"
    if isinstance(node, Strong):
        return f"**{_inlines(node.children)}**"
    if isinstance(node, Code):
        return _code_span(node.text)
    if isinstance(node, Note):
        return f"*({md_escape(node.text)})*"
    target = md_link_destination(node.url)
    if node.label == node.url:
        return f"<{target}>"
    return f"[{md_escape(node.label)}]({target})"


def _inlines(nodes: Inlines) -> str:
    return "".join(_inline(node) for node in nodes)


def _list_lines(items: tuple[ListItem, ...], *, ordered: bool, indent: str = "") -> list[str]:
    lines: list[str] = []
    for number, item in enumerate(items, start=1):
        marker = f"{number}. " if ordered else "- "
        lines.append(f"{indent}{marker}{_inlines(item.content)}")
        lines += _list_lines(item.children, ordered=False, indent=indent + " " * len(marker))
    return lines


def _table_lines(table: Table) -> list[str]:
    def cell(text: str) -> str:
        return md_escape(text).replace("|", "\\|")

    rows = ["| " + " | ".join(cell(k) for k in table.header) + " |", "|" + "---|" * len(table.header)]
    rows += ["| " + " | ".join(cell(v) for v in row) + " |" for row in table.rows]
    return rows


def _block_lines(block: Paragraph | BulletList | OrderedList | SourceList | Table) -> list[str]:
    if isinstance(block, Paragraph):
        return [_inlines(line) for line in block.lines]
    if isinstance(block, BulletList):
        return _list_lines(block.items, ordered=False)
    if isinstance(block, OrderedList):
        return _list_lines(block.items, ordered=True)
    if isinstance(block, SourceList):
        return [f"- {md_escape(entry.citation_id, markers=True)} {_inlines(entry.content)}" for entry in block.entries]
    return _table_lines(block)


def render_document_markdown(document: ReportDocument) -> str:
    lines: list[str] = [f"# {md_escape(document.title)}", ""]
    for block in document.intro:
        lines += [*_block_lines(block), ""]
    for section in document.sections:
        lines += [f"## {section.heading}", ""]
        for block in section.blocks:
            lines += [*_block_lines(block), ""]
    return "\n".join(lines)
