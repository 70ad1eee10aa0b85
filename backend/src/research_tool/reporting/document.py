"""The one rendering core of the md and html exports: a report as a small tree of blocks and inlines.

`build_document` decides what a report shows and in which order (sections, lists, labels); the md
and html renderers only decide how each node is written. Every string taken from the report (so
from sources and models) lands in a `Text`, `Code` or `Link` node, and each renderer escapes those
for its own syntax: nothing here is markup.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal
from urllib.parse import quote, urlsplit

from markdown_it import MarkdownIt

from research_tool.models.entities import Citation
from research_tool.models.report import Finding, Report, ReportEntity, ReportMetadata
from research_tool.models.stop_reasons import stop_label
from research_tool.reporting.text import clean_text, one_line

LINKABLE_SCHEMES = frozenset({"http", "https", "file"})
MARKER = re.compile(r"\[(\d+)\]")
MAX_ENTITIES = 30
MAX_TABLE_COLUMNS = 8

# --- inline nodes -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Text:
    """Untrusted text. With `markers`, its `[n]` citation markers may become links to the sources. `prose`: the
    text's own emphasis and code spans are already nodes beside it (`inline_markup`), so a `*` or `_` left in it
    is literal and only needs escaping where it could close emphasis."""

    text: str
    markers: bool = False
    prose: bool = False


@dataclass(frozen=True)
class Emph:
    children: tuple[Inline, ...]


@dataclass(frozen=True)
class Strong:
    children: tuple[Inline, ...]


@dataclass(frozen=True)
class Code:
    text: str


@dataclass(frozen=True)
class Note:
    """A parenthesised aside about the line it ends (a finding's confidence)."""

    text: str


@dataclass(frozen=True)
class Link:
    """A link whose `url` has a linkable scheme (checked by `link_or_text`)."""

    url: str
    label: str


Inline = Text | Emph | Strong | Code | Note | Link
Inlines = tuple[Inline, ...]

# --- block nodes ------------------------------------------------------------------------------------

Role = Literal["", "meta", "small", "short-answer"]


@dataclass(frozen=True)
class Paragraph:
    lines: tuple[Inlines, ...]  # hard line breaks between them
    role: Role = ""


@dataclass(frozen=True)
class ListItem:
    content: Inlines
    children: tuple[ListItem, ...] = ()


@dataclass(frozen=True)
class BulletList:
    items: tuple[ListItem, ...]
    role: Role = ""


@dataclass(frozen=True)
class OrderedList:
    items: tuple[ListItem, ...]


@dataclass(frozen=True)
class SourceEntry:
    citation_id: str  # "[n]"
    content: Inlines


@dataclass(frozen=True)
class SourceList:
    entries: tuple[SourceEntry, ...]


@dataclass(frozen=True)
class Table:
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]


Block = Paragraph | BulletList | OrderedList | SourceList | Table


@dataclass(frozen=True)
class Section:
    heading: str
    blocks: tuple[Block, ...]


@dataclass(frozen=True)
class ReportDocument:
    title: str
    intro: tuple[Block, ...]
    sections: tuple[Section, ...]
    citation_ids: frozenset[str]  # markers that name a source, so may link to it


# --- helpers ---------------------------------------------------------------------------------------


def is_linkable(url: str) -> bool:
    """Only http(s) and file urls become links; javascript:, data:, relative urls stay text."""
    candidate = url.strip()
    if not candidate or any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in candidate):
        return False
    return urlsplit(candidate).scheme.lower() in LINKABLE_SCHEMES


def link_or_text(url: str, label: str | None = None) -> Inline:
    return Link(url.strip(), label if label is not None else url.strip()) if is_linkable(url) else Text(url)


def cite_anchor(citation_id: str) -> str:
    number = citation_id.strip("[]")
    return f"cite-{number}" if number.isdigit() else "cite-" + re.sub(r"\W", "", number)


def finding_label(finding: Finding) -> str:
    parts = [f"confidence {finding.confidence:.2f}", "verified" if finding.verified else "single source"]
    return ", ".join(parts)


def joined(parts: list[Inlines], separator: str) -> Inlines:
    out: list[Inline] = []
    for index, part in enumerate(parts):
        if index:
            out.append(Text(separator))
        out.extend(part)
    return tuple(out)


_LIST_ITEM = re.compile(r"^\s*[-*]\s+")


def text_blocks(text: str) -> tuple[Block, ...]:
    """A multi-paragraph text (the answer): blank-line separated paragraphs, `- ` lines as lists, and in each
    line its emphasis and code spans (`_..._`, `*...*`, `**...**`, `` `...` ``)."""
    blocks: list[Block] = []
    for raw in re.split(r"\n\s*\n", clean_text(text).strip()):
        lines = [line.strip() for line in raw.strip().splitlines() if line.strip()]
        if not lines:
            continue
        if all(_LIST_ITEM.match(line) for line in lines):
            items = tuple(ListItem(inline_markup(_LIST_ITEM.sub("", line))) for line in lines)
            blocks.append(BulletList(items))
        else:
            blocks.append(Paragraph(tuple(inline_markup(line) for line in lines)))
    return tuple(blocks)


_INLINE_PARSER: MarkdownIt | None = None


def _inline_parser() -> MarkdownIt:
    """CommonMark's emphasis and code spans and nothing else: no links, images, HTML, entities or escapes."""
    global _INLINE_PARSER
    if _INLINE_PARSER is None:
        _INLINE_PARSER = MarkdownIt("zero").enable(["emphasis", "backticks"])
    return _INLINE_PARSER


def inline_markup(line: str) -> Inlines:
    """One line of the answer or of a source's sentence as nodes: the emphasis and code spans it writes become
    Emph, Strong and Code (so no reader sees `\\_..\\_` or `` \\`name\\` ``), the rest stays untrusted Text
    with its citation markers. Only these three node kinds come from the text, whatever it holds."""
    root: list[Inline] = []
    stack: list[tuple[str, list[Inline]]] = []
    current = root
    tokens = _inline_parser().parseInline(one_line(line))[0].children or []
    for token in tokens:
        if token.type in ("em_open", "strong_open"):
            stack.append((token.type, current))
            current = []
        elif token.type in ("em_close", "strong_close") and stack:
            kind, parent = stack.pop()
            children = tuple(current)
            parent.append(Emph(children) if kind == "em_open" else Strong(children))
            current = parent
        elif token.type == "code_inline":
            current.append(Code(token.content))
        elif token.content:
            current.append(Text(token.content, markers=True, prose=True))
    while stack:  # unbalanced tokens do not happen with markdown-it; flatten rather than lose text
        _, parent = stack.pop()
        parent.extend(current)
        current = parent
    return tuple(root)


# --- the report as a document ----------------------------------------------------------------------


def short_answer_line(report: Report) -> tuple[str, str]:
    """(label, text) of the line under the title: the short answer, or that the sources do not answer."""
    if not report.answered:
        return "Not answered", "the sources found do not answer this question."
    if report.short_answer:
        return "Short answer", report.short_answer
    return "", ""


def header_line(report: Report) -> str:
    """`domain technical · tier standard · privacy local only · completed: <why it stopped>`: the same words as
    the page's and the CLI's (`models.stop_reasons`)."""
    facts = [f"domain {report.domain}", f"tier {report.tier}", f"privacy {report.privacy_mode.replace('_', ' ')}"]
    why = stop_label(report.stop_reason)
    facts.append(f"{report.status}: {why}" if why else report.status)
    return " · ".join(facts)


def _intro(report: Report) -> list[Block]:
    intro: list[Block] = []
    label, short = short_answer_line(report)
    if label:
        intro.append(Paragraph(((Strong((Text(f"{label}:"),)), Text(" " + one_line(short))),), "short-answer"))
    if report.refined_query and one_line(report.refined_query) != one_line(report.query):
        intro.append(
            Paragraph(((Emph((Text("Researched as:"),)), Text(" " + one_line(report.refined_query))),), "meta")
        )
    intro.append(Paragraph(((Text(header_line(report)),),), "meta"))
    return intro


def _answer_blocks(report: Report) -> tuple[Block, ...]:
    return text_blocks(report.answer) or (Paragraph(((Emph((Text("No answer."),)),),)),)


SUMMARY_TITLE_CHARS = 72


def build_summary_document(report: Report, more: str) -> ReportDocument:
    """The terminal's compact view: the short answer, the header, the answer and the sources the answer cites
    (one line each), then where the full report is (`more`). Everything else stays in the full report."""
    cited = set(MARKER.findall(report.answer)) | set(MARKER.findall(report.short_answer or ""))
    shown = [c for c in report.citations if c.id.strip("[]") in cited] or report.citations[:3]
    entries = []
    for citation in shown:
        title = Text(one_line(citation.title)[:SUMMARY_TITLE_CHARS].rstrip())
        where = (Text(" — "), Code(one_line(citation.location))) if citation.location else ()
        entries.append(SourceEntry(citation.id, (Strong((title,)), *where)))
    rest = len(report.citations) - len(shown)
    parts = [f"{rest} more source{'s' if rest != 1 else ''}"] if rest > 0 else []
    parts += [f"{len(report.findings)} findings"] if report.findings else []
    parts += ["gaps"] if report.gaps else []
    parts += ["entities"] if report.entities else []
    held = f" ({', '.join(parts)})" if parts else ""
    footer = Paragraph(((Emph((Text(f"Full report{held}: {more}"),)),),), "meta")
    sections = [Section("Answer", _answer_blocks(report))]
    if entries:
        sections.append(Section("Sources", (SourceList(tuple(entries)), footer)))
    else:
        sections.append(Section("Sources", (footer,)))
    return ReportDocument(
        title=one_line(report.query),
        intro=tuple(_intro(report)),
        sections=tuple(sections),
        citation_ids=frozenset(c.id for c in report.citations),
    )


def build_document(report: Report) -> ReportDocument:
    intro = _intro(report)
    sections = [Section("Answer", _answer_blocks(report))]
    on_question = [f for f in report.findings if f.bears_on_question]
    also = [f for f in report.findings if not f.bears_on_question]
    if on_question:
        sections.append(Section("Key findings", (_findings(on_question),)))
    if also:
        sections.append(Section(ALSO_IN_SOURCES, (_also_in_sources(also),)))
    contradicted = [f for f in report.findings if f.contradictions]
    if contradicted:
        sections.append(Section("Contradictions", (_contradictions(contradicted),)))
    if report.gaps:
        sections.append(Section("Gaps", (BulletList(tuple(ListItem((Text(one_line(g)),)) for g in report.gaps)),)))
    if report.citations:
        entries = tuple(SourceEntry(c.id, _citation(c)) for c in report.citations)
        sections.append(Section("Sources", (SourceList(entries),)))
    if report.entities:
        items = tuple(ListItem((Text(entity_line(e)),)) for e in report.entities[:MAX_ENTITIES])
        sections.append(Section("Entities", (BulletList(items),)))
    if report.saturation:
        table = _saturation_table(report.saturation)
        if table is not None:
            sections.append(Section("Saturation", (table,)))
    sections.append(Section("Metadata", (_metadata(report),)))
    return ReportDocument(
        title=one_line(report.query),
        intro=tuple(intro),
        sections=tuple(sections),
        citation_ids=frozenset(c.id for c in report.citations),
    )


def counted(n: int, word: str) -> str:
    """`1 mention`, `2 mentions`."""
    return f"{n} {word}{'' if n == 1 else 's'}"


def entity_line(entity: ReportEntity) -> str:
    """`Frankfurt (place; 1 mention in 1 source)`; an untyped entity (`other`) shows no type."""
    counts = f"{counted(entity.mentions, 'mention')} in {counted(entity.sources, 'source')}"
    kind = one_line(entity.type)
    return (
        f"{one_line(entity.name)} ({kind}; {counts})"
        if kind and kind != "other"
        else f"{one_line(entity.name)} ({counts})"
    )


def _findings(findings: list[Finding]) -> OrderedList:
    items = []
    for finding in findings:
        conflicts = tuple(
            ListItem((Text("Contradicted by: "), Text(one_line(c), markers=True))) for c in finding.contradictions
        )
        content = (*inline_markup(finding.statement), Text(" "), Note(finding_label(finding)))
        items.append(ListItem(content, conflicts))
    return OrderedList(tuple(items))


ALSO_IN_SOURCES = "Also in the sources"  # findings that do not bear on the question: no verified or confidence mark


def _also_in_sources(findings: list[Finding]) -> BulletList:
    """Statements of the sources that do not bear on the question, listed without a mark."""
    return BulletList(tuple(ListItem(inline_markup(f.statement)) for f in findings))


def _contradictions(findings: list[Finding]) -> BulletList:
    items = []
    for finding in findings:
        for conflict in finding.contradictions:
            statement = Text(one_line(finding.statement), markers=True)
            versus = (Text(" "), Strong((Text("vs"),)), Text(" "))
            items.append(ListItem((statement, *versus, Text(one_line(conflict), markers=True))))
    return BulletList(tuple(items))


def _citation(citation: Citation) -> Inlines:
    parts: list[Inlines] = [(Strong((Text(one_line(citation.title)),)),)]
    authors = [one_line(a) for a in citation.authors if a.strip()]
    byline = ", ".join(authors[:3]) + (" et al." if len(authors) > 3 else "")
    if byline and citation.year:
        parts.append((Text(f"{byline} ({citation.year})"),))
    elif byline or citation.year:
        parts.append((Text(byline or str(citation.year)),))
    if citation.location:
        parts.append((Code(one_line(citation.location)),))
    parts.append((Text(f"{one_line(citation.type)} via {one_line(citation.provider)}"),))
    if citation.doi:
        doi = one_line(citation.doi)
        parts.append((Text("doi: "), link_or_text("https://doi.org/" + quote(doi, safe="/:;()._-"), doi)))
    parts.append((link_or_text(one_line(citation.url)),))
    return joined(parts, " — ")


def _saturation_table(history: list[dict[str, object]]) -> Table | None:
    keys: list[str] = []
    for entry in history:
        for key, value in entry.items():
            if key not in keys and isinstance(value, (int, float, str, bool)):
                keys.append(key)
    keys = keys[:MAX_TABLE_COLUMNS]
    if not keys:
        return None
    rows = tuple(tuple(_cell(entry.get(key, "")) for key in keys) for entry in history)
    return Table(tuple(one_line(k) for k in keys), rows)


def _cell(value: object) -> str:
    return f"{value:.3f}" if isinstance(value, float) else one_line(str(value))


def fallback_line(meta: ReportMetadata) -> str | None:
    """One line on the steps the model could not do (step names and reason codes only: no model text)."""
    if not meta.fallbacks and not meta.degraded_reason:
        return None
    counts: dict[tuple[str, str], int] = {}
    for fallback in meta.fallbacks:
        counts[(fallback.step, fallback.reason)] = counts.get((fallback.step, fallback.reason), 0) + 1
    steps = "; ".join(f"{step}{f' ×{n}' if n > 1 else ''}: {reason}" for (step, reason), n in counts.items())
    line = f"model fallbacks: {len(meta.fallbacks)} step(s) done by the offline engine ({steps})" if steps else ""
    if meta.degraded_reason:
        line = f"{line}; degraded: {meta.degraded_reason}" if line else f"degraded: {meta.degraded_reason}"
    return line


def _metadata(report: Report) -> BulletList:
    meta = report.metadata
    failures: Inlines = (Text(f"access failures: {meta.access_failures}; citations removed: {meta.citations_removed}"),)
    if meta.degraded_mode:
        failures = (*failures, Text("; "), Strong((Text("degraded mode"),)))
    lines: list[Inlines] = [
        (Text(f"engine {one_line(meta.engine)}, model {one_line(meta.model)}, {meta.token_count} tokens"),),
        (Text(f"{meta.iterations} iterations in {meta.duration_s:.1f} s, {meta.provider_calls} provider calls"),),
        (Text(f"{meta.sources_retrieved} sources, {meta.facts_extracted} facts ({meta.facts_verified} verified)"),),
        failures,
        *([(Text(line),)] if (line := fallback_line(meta)) else []),
        *((Text(f"model: {one_line(note)}"),) for note in meta.model_notes),
        (Text(f"generated {one_line(meta.timestamp)} · session {one_line(report.session_id)}"),),
    ]
    return BulletList(tuple(ListItem(line) for line in lines), "small")
