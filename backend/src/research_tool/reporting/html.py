"""The report as one self-contained html page. Every string from the report is escaped text; only
http(s) and file urls become links, and a Content-Security-Policy forbids scripts and loads anyway."""

from __future__ import annotations

import html
import re

from research_tool.reporting.document import (
    MARKER,
    Block,
    BulletList,
    Code,
    Emph,
    Inline,
    Inlines,
    Link,
    ListItem,
    Note,
    OrderedList,
    Paragraph,
    ReportDocument,
    SourceList,
    Strong,
    Table,
    Text,
    cite_anchor,
    is_linkable,
)
from research_tool.reporting.text import clean_text, one_line

_CSS = """
body{font:16px/1.55 system-ui,-apple-system,"Segoe UI",sans-serif;max-width:52rem;
margin:2rem auto;padding:0 1rem;color:#1b1b1b}
h1{font-size:1.6rem;line-height:1.25}h2{font-size:1.2rem;margin-top:2rem;border-bottom:1px solid #ddd}
.meta,.small{color:#555;font-size:.9rem}ol.sources li{margin:.4rem 0}a.cite{text-decoration:none}
.conf{color:#555;font-size:.85rem}table{border-collapse:collapse;font-size:.85rem}
td,th{border:1px solid #ddd;padding:.2rem .5rem;text-align:right}code{font-size:.85rem}
""".strip()
# Defence in depth: even a string that escaped escaping could not run or load anything.
_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src 'none'"


def esc(text: object) -> str:
    """Escaped html text (quotes too, so it is safe in attributes), without control characters."""
    return html.escape(clean_text(str(text)), quote=True)


def _text_with_markers(text: str, citation_ids: frozenset[str]) -> str:
    """Escape the text, then link each `[n]` that names a source to its entry."""

    def link(match: re.Match[str]) -> str:
        marker = match.group(0)
        if marker not in citation_ids:
            return marker
        return f'<a class="cite" href="#{cite_anchor(marker)}">{marker}</a>'

    return MARKER.sub(link, esc(text))


class _HtmlWriter:
    def __init__(self, citation_ids: frozenset[str]) -> None:
        self.citation_ids = citation_ids

    def inline(self, node: Inline) -> str:
        if isinstance(node, Text):
            return _text_with_markers(node.text, self.citation_ids) if node.markers else esc(node.text)
        if isinstance(node, Emph):
            return f"<em>{self.inlines(node.children)}</em>"
        if isinstance(node, Strong):
            return f"<strong>{self.inlines(node.children)}</strong>"
        if isinstance(node, Code):
            return f"<code>{esc(node.text)}</code>"
        if isinstance(node, Note):
            return f'<span class="conf">({esc(node.text)})</span>'
        return self.link(node)

    @staticmethod
    def link(node: Link) -> str:
        if not is_linkable(node.url):
            return esc(node.label)
        return f'<a href="{esc(node.url.strip())}" rel="noopener noreferrer">{esc(node.label)}</a>'

    def inlines(self, nodes: Inlines) -> str:
        return "".join(self.inline(node) for node in nodes)

    def item(self, item: ListItem) -> str:
        children = "<ul>" + "".join(self.item(child) for child in item.children) + "</ul>" if item.children else ""
        return f"<li>{self.inlines(item.content)}{children}</li>"

    def block(self, block: Block) -> str:
        if isinstance(block, Paragraph):
            attrs = f' class="{block.role}"' if block.role else ""
            return f"<p{attrs}>" + "<br>\n".join(self.inlines(line) for line in block.lines) + "</p>"
        if isinstance(block, BulletList):
            attrs = f' class="{block.role}"' if block.role else ""
            return f"<ul{attrs}>\n" + "\n".join(self.item(item) for item in block.items) + "\n</ul>"
        if isinstance(block, OrderedList):
            return "<ol>\n" + "\n".join(self.item(item) for item in block.items) + "\n</ol>"
        if isinstance(block, SourceList):
            entries = [
                f'<li id="{cite_anchor(e.citation_id)}" value="{esc(e.citation_id.strip("[]"))}">'
                f"{self.inlines(e.content)}</li>"
                for e in block.entries
            ]
            return '<ol class="sources">\n' + "\n".join(entries) + "\n</ol>"
        return self.table(block)

    @staticmethod
    def table(table: Table) -> str:
        head = "".join(f"<th>{esc(k)}</th>" for k in table.header)
        rows = "".join("<tr>" + "".join(f"<td>{esc(v)}</td>" for v in row) + "</tr>" for row in table.rows)
        return f"<table><tr>{head}</tr>{rows}</table>"


def render_document_html(document: ReportDocument) -> str:
    writer = _HtmlWriter(document.citation_ids)
    parts: list[str] = [
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{esc(one_line(document.title))}</title>",
        f"<style>{_CSS}</style>",
        "</head>",
        "<body>",
        f"<h1>{esc(document.title)}</h1>",
    ]
    parts += [writer.block(block) for block in document.intro]
    for section in document.sections:
        parts.append(f"<h2>{esc(section.heading)}</h2>")
        parts += [writer.block(block) for block in section.blocks]
    parts += ["</body>", "</html>", ""]
    return "\n".join(parts)
