"""The report in the formats a reader asks for: md, json (DESIGN §7), html, bib.

Everything in a report that came from a source (titles, authors, quoted sentences, urls) is data:
the html page escapes every such string and only turns http(s) and file urls into links, so a
source titled `<script>alert(1)</script>` prints as text; the BibTeX escapes TeX's special
characters; the markdown defuses raw HTML tags.
"""

from __future__ import annotations

import asyncio
import html
import json
import os
import re
import tempfile
import unicodedata
from collections.abc import Callable
from pathlib import Path
from typing import Literal, get_args
from urllib.parse import quote, urlsplit

from research_tool.core.errors import BadInputError
from research_tool.models.entities import Citation
from research_tool.models.report import Finding, Report, ReportMetadata

ExportFormat = Literal["md", "json", "html", "bib"]
EXPORT_FORMATS: tuple[str, ...] = get_args(ExportFormat)
FILE_SUFFIXES: dict[str, str] = {"md": ".md", "json": ".json", "html": ".html", "bib": ".bib"}

_MARKER = re.compile(r"\[(\d+)\]")
_LINKABLE_SCHEMES = frozenset({"http", "https", "file"})


def check_format(fmt: str) -> ExportFormat:
    if fmt not in EXPORT_FORMATS:
        raise BadInputError(f"unknown format '{fmt}'; known: {', '.join(EXPORT_FORMATS)}")
    return fmt  # type: ignore[return-value]


def render_report(report: Report, fmt: str) -> str:
    """The report as text in one format."""
    return _RENDERERS[check_format(fmt)](report)


async def export_report(report: Report, fmt: str, out_dir: Path | str) -> Path:
    """Write `<out_dir>/<session_id>.<fmt>` (off the event loop) and return its path."""
    check_format(fmt)
    return await asyncio.to_thread(write_report, report, fmt, out_dir)


def write_report(report: Report, fmt: str, out_dir: Path | str) -> Path:
    """Blocking version of `export_report`: render, then write atomically (temp file + rename)."""
    text = render_report(report, fmt)
    folder = Path(out_dir)
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"{_safe_file_stem(report.session_id)}{FILE_SUFFIXES[fmt]}"
    handle, tmp_name = tempfile.mkstemp(dir=folder, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8", newline="\n") as out:
            out.write(text)
        os.replace(tmp_name, target)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise
    return target


def _safe_file_stem(session_id: str) -> str:
    stem = re.sub(r"[^A-Za-z0-9._-]", "_", session_id).strip("._")
    return stem or "report"


def _one_line(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def _year_text(citation: Citation) -> str:
    return str(citation.year) if citation.year else ""


# --- json ---------------------------------------------------------------------------------------


def render_json(report: Report) -> str:
    return json.dumps(report.model_dump(mode="json"), indent=2, ensure_ascii=False) + "\n"


# --- markdown -----------------------------------------------------------------------------------

_TAG_START = re.compile(r"<(?=[A-Za-z/!?])")


def _md_text(text: str) -> str:
    """Source text inside markdown: a `<` that could open an HTML tag is backslash-escaped."""
    return _TAG_START.sub(r"\\<", text)


def _md_inline(text: str) -> str:
    return _md_text(_one_line(text))


def _md_link_target(url: str) -> str | None:
    if urlsplit(url).scheme.lower() not in _LINKABLE_SCHEMES:
        return None
    return url.replace(" ", "%20").replace("(", "%28").replace(")", "%29").replace("<", "%3C").replace(">", "%3E")


def _finding_label(finding: Finding) -> str:
    parts = [f"confidence {finding.confidence:.2f}", "verified" if finding.verified else "single source"]
    return ", ".join(parts)


def _short_answer_line(report: Report) -> tuple[str, str]:
    """(label, text) of the line under the title: the short answer, or that the sources do not answer."""
    if not report.answered:
        return "Not answered", "the sources found do not answer this question."
    if report.short_answer:
        return "Short answer", report.short_answer
    return "", ""


def render_markdown(report: Report) -> str:
    lines: list[str] = [f"# {_md_inline(report.query)}", ""]
    label, short = _short_answer_line(report)
    if label:
        lines += [f"**{label}:** {_md_inline(short)}", ""]
    if report.refined_query and _one_line(report.refined_query) != _one_line(report.query):
        lines += [f"*Researched as:* {_md_inline(report.refined_query)}", ""]
    facts = [
        f"domain {report.domain}",
        f"tier {report.tier}",
        f"privacy {report.privacy_mode}",
        f"status {report.status}",
    ]
    if report.stop_reason:
        facts.append(f"stopped: {_md_inline(report.stop_reason)}")
    lines += [" · ".join(facts), "", "## Answer", "", _md_text(report.answer.strip()) or "_No answer._", ""]

    if report.findings:
        lines += ["## Key findings", ""]
        for number, finding in enumerate(report.findings, start=1):
            lines.append(f"{number}. {_md_inline(finding.statement)} *({_finding_label(finding)})*")
            for conflict in finding.contradictions:
                lines.append(f"   - Contradicted by: {_md_inline(conflict)}")
        lines.append("")

    contradicted = [f for f in report.findings if f.contradictions]
    if contradicted:
        lines += ["## Contradictions", ""]
        for finding in contradicted:
            for conflict in finding.contradictions:
                lines.append(f"- {_md_inline(finding.statement)} **vs** {_md_inline(conflict)}")
        lines.append("")

    if report.gaps:
        lines += ["## Gaps", "", *(f"- {_md_inline(gap)}" for gap in report.gaps), ""]

    if report.citations:
        lines += ["## Sources", ""]
        for citation in report.citations:
            lines.append(f"- {citation.id} {_md_citation(citation)}")
        lines.append("")

    if report.entities:
        lines += ["## Entities", ""]
        lines += [
            f"- {_md_inline(e.name)} ({_md_inline(e.type)}; {e.mentions} mentions in {e.sources} sources)"
            for e in report.entities[:30]
        ]
        lines.append("")

    if report.saturation:
        lines += ["## Saturation", "", *_md_saturation_table(report.saturation), ""]

    meta = report.metadata
    lines += [
        "## Metadata",
        "",
        f"- engine {meta.engine}, model {meta.model}, {meta.token_count} tokens",
        f"- {meta.iterations} iterations in {meta.duration_s:.1f} s, {meta.provider_calls} provider calls",
        f"- {meta.sources_retrieved} sources, {meta.facts_extracted} facts ({meta.facts_verified} verified)",
        f"- access failures: {meta.access_failures}; citations removed: {meta.citations_removed}"
        + ("; **degraded mode**" if meta.degraded_mode else ""),
        *(f"- {line}" for line in [fallback_line(meta)] if line),
        f"- generated {meta.timestamp} · session {report.session_id}",
        "",
    ]
    return "\n".join(lines)


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


def _md_citation(citation: Citation) -> str:
    parts = [f"**{_md_inline(citation.title)}**"]
    byline = ", ".join(_one_line(a) for a in citation.authors[:3]) + (" et al." if len(citation.authors) > 3 else "")
    if byline and citation.year:
        parts.append(f"{_md_inline(byline)} ({citation.year})")
    elif byline or citation.year:
        parts.append(_md_inline(byline) or _year_text(citation))
    if citation.location:
        location = _one_line(citation.location).replace("`", "'")
        parts.append(f"`{location}`")
    parts.append(f"{citation.type} via {citation.provider}")
    if citation.doi:
        parts.append(f"doi:{_md_inline(citation.doi)}")
    target = _md_link_target(citation.url)
    parts.append(f"<{target}>" if target else _md_inline(citation.url))
    return " — ".join(parts)


def _md_saturation_table(history: list[dict[str, object]]) -> list[str]:
    keys: list[str] = []
    for entry in history:
        for key, value in entry.items():
            if key not in keys and isinstance(value, (int, float, str, bool)):
                keys.append(key)
    keys = keys[:8]
    if not keys:
        return []
    rows = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    for entry in history:
        cells = []
        for key in keys:
            value = entry.get(key, "")
            cells.append(f"{value:.3f}" if isinstance(value, float) else _md_inline(str(value)).replace("|", "\\|"))
        rows.append("| " + " | ".join(cells) + " |")
    return rows


# --- html ---------------------------------------------------------------------------------------

_CSS = """
body{font:16px/1.55 system-ui,-apple-system,"Segoe UI",sans-serif;max-width:52rem;margin:2rem auto;padding:0 1rem;
color:#1b1b1b}
h1{font-size:1.6rem;line-height:1.25}h2{font-size:1.2rem;margin-top:2rem;border-bottom:1px solid #ddd}
.meta,.small{color:#555;font-size:.9rem}ol.sources li{margin:.4rem 0}a.cite{text-decoration:none}
.conf{color:#555;font-size:.85rem}table{border-collapse:collapse;font-size:.85rem}
td,th{border:1px solid #ddd;padding:.2rem .5rem;text-align:right}code{font-size:.85rem}
""".strip()


def _esc(text: object) -> str:
    return html.escape(str(text), quote=True)


def _safe_href(url: str) -> str | None:
    """An escaped href for http(s)/file urls; None for anything else (javascript:, data:, relative)."""
    candidate = url.strip()
    if any(ord(ch) < 0x20 for ch in candidate):
        return None
    if urlsplit(candidate).scheme.lower() not in _LINKABLE_SCHEMES:
        return None
    return _esc(candidate)


def _cite_anchor(citation_id: str) -> str:
    number = citation_id.strip("[]")
    return f"cite-{number}" if number.isdigit() else "cite-" + re.sub(r"\W", "", number)


def _html_text_with_markers(text: str, known: set[str]) -> str:
    """Escape source text, then link each `[n]` that names a citation to its entry."""
    escaped = _esc(text)

    def link(match: re.Match[str]) -> str:
        marker = match.group(0)
        if marker not in known:
            return marker
        return f'<a class="cite" href="#{_cite_anchor(marker)}">{marker}</a>'

    return _MARKER.sub(link, escaped)


_LIST_ITEM = re.compile(r"^\s*[-*]\s+")


def _html_paragraphs(text: str, known: set[str]) -> str:
    blocks = [b.strip() for b in re.split(r"\n\s*\n", text.strip()) if b.strip()]
    out: list[str] = []
    for block in blocks:
        lines = block.splitlines()
        if all(_LIST_ITEM.match(line) for line in lines):
            items = "".join(f"<li>{_html_text_with_markers(_LIST_ITEM.sub('', line), known)}</li>" for line in lines)
            out.append(f"<ul>{items}</ul>")
        else:
            out.append("<p>" + "<br>\n".join(_html_text_with_markers(line, known) for line in lines) + "</p>")
    return "\n".join(out)


def render_html(report: Report) -> str:
    known = {c.id for c in report.citations}
    parts: list[str] = [
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        # Defence in depth: even a string that escaped escaping could not run or load anything.
        '<meta http-equiv="Content-Security-Policy"'
        " content=\"default-src 'none'; style-src 'unsafe-inline'; img-src 'none'\">",
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{_esc(_one_line(report.query))}</title>",
        f"<style>{_CSS}</style>",
        "</head>",
        "<body>",
        f"<h1>{_esc(report.query)}</h1>",
    ]
    label, short = _short_answer_line(report)
    if label:
        parts.append(f'<p class="short-answer"><strong>{_esc(label)}:</strong> {_esc(short)}</p>')
    if report.refined_query and _one_line(report.refined_query) != _one_line(report.query):
        parts.append(f'<p class="meta">Researched as: {_esc(report.refined_query)}</p>')
    meta_bits = [f"domain {report.domain}", f"tier {report.tier}", f"status {report.status}"]
    if report.stop_reason:
        meta_bits.append(f"stopped: {report.stop_reason}")
    parts.append(f'<p class="meta">{" · ".join(_esc(b) for b in meta_bits)}</p>')
    parts += ["<h2>Answer</h2>", _html_paragraphs(report.answer, known) or "<p><em>No answer.</em></p>"]

    if report.findings:
        parts += ["<h2>Key findings</h2>", "<ol>"]
        for finding in report.findings:
            item = _html_text_with_markers(finding.statement, known)
            item += f' <span class="conf">({_esc(_finding_label(finding))})</span>'
            if finding.contradictions:
                conflicts = "".join(f"<li>{_html_text_with_markers(c, known)}</li>" for c in finding.contradictions)
                item += f"<ul><li>Contradicted by:<ul>{conflicts}</ul></li></ul>"
            parts.append(f"<li>{item}</li>")
        parts.append("</ol>")

    if report.gaps:
        parts += ["<h2>Gaps</h2>", "<ul>", *(f"<li>{_esc(gap)}</li>" for gap in report.gaps), "</ul>"]

    if report.citations:
        parts += ["<h2>Sources</h2>", '<ol class="sources">']
        for citation in report.citations:
            anchor, number = _cite_anchor(citation.id), _esc(citation.id.strip("[]"))
            parts.append(f'<li id="{anchor}" value="{number}">{_html_citation(citation)}</li>')
        parts.append("</ol>")

    if report.entities:
        names = ", ".join(f'{_esc(e.name)} <span class="small">({_esc(e.type)})</span>' for e in report.entities[:30])
        parts += ["<h2>Entities</h2>", f"<p>{names}</p>"]

    if report.saturation:
        parts += ["<h2>Saturation</h2>", _html_saturation_table(report.saturation)]

    meta = report.metadata
    meta_lines = [
        f"engine {meta.engine}, model {meta.model}, {meta.token_count} tokens",
        f"{meta.iterations} iterations in {meta.duration_s:.1f} s, {meta.provider_calls} provider calls",
        f"{meta.sources_retrieved} sources, {meta.facts_extracted} facts ({meta.facts_verified} verified)",
        f"access failures: {meta.access_failures}; citations removed: {meta.citations_removed}"
        + ("; degraded mode" if meta.degraded_mode else ""),
        *(line for line in [fallback_line(meta)] if line),
        f"generated {meta.timestamp} · session {report.session_id}",
    ]
    parts += ["<h2>Metadata</h2>", '<ul class="small">', *(f"<li>{_esc(line)}</li>" for line in meta_lines), "</ul>"]
    parts += ["</body>", "</html>", ""]
    return "\n".join(parts)


def _html_citation(citation: Citation) -> str:
    bits = [f"<strong>{_esc(_one_line(citation.title))}</strong>"]
    if citation.authors:
        byline = ", ".join(citation.authors[:3]) + (" et al." if len(citation.authors) > 3 else "")
        bits.append(_esc(byline) + (f" ({citation.year})" if citation.year else ""))
    elif citation.year:
        bits.append(str(citation.year))
    if citation.location:
        bits.append(f"<code>{_esc(citation.location)}</code>")
    bits.append(_esc(f"{citation.type} via {citation.provider}"))
    if citation.doi:
        doi_href = _safe_href("https://doi.org/" + quote(citation.doi.strip(), safe="/:;()._-"))
        bits.append(f'doi: <a href="{doi_href}" rel="noopener noreferrer">{_esc(citation.doi)}</a>')
    href = _safe_href(citation.url)
    if href:
        bits.append(f'<a href="{href}" rel="noopener noreferrer">{_esc(citation.url)}</a>')
    else:
        bits.append(f"<span>{_esc(citation.url)}</span>")
    return " — ".join(bits)


def _html_saturation_table(history: list[dict[str, object]]) -> str:
    keys: list[str] = []
    for entry in history:
        for key, value in entry.items():
            if key not in keys and isinstance(value, (int, float, str, bool)):
                keys.append(key)
    keys = keys[:8]
    head = "".join(f"<th>{_esc(k)}</th>" for k in keys)
    rows = []
    for entry in history:
        cells = []
        for key in keys:
            value = entry.get(key, "")
            cells.append(f"<td>{_esc(f'{value:.3f}' if isinstance(value, float) else value)}</td>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><tr>{head}</tr>{''.join(rows)}</table>"


# --- bibtex -------------------------------------------------------------------------------------

_BIB_SPECIALS: dict[str, str] = {
    "\\": r"\textbackslash{}",
    "{": r"\{",
    "}": r"\}",
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


def bib_escape(text: str) -> str:
    """TeX-safe text for a BibTeX field (special characters escaped, whitespace collapsed)."""
    return "".join(_BIB_SPECIALS.get(ch, ch) for ch in _one_line(text))


def _bib_verbatim(value: str) -> str:
    """A url or doi: no TeX escaping (url/doi fields are verbatim), but braces, backslashes and
    spaces, which would break the entry, are percent-encoded."""
    return "".join({"{": "%7B", "}": "%7D", "\\": "%5C", " ": "%20"}.get(ch, ch) for ch in value.strip())


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
    return key or "ref" + (citation.id.strip("[]") or "0")


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


_RENDERERS: dict[str, Callable[[Report], str]] = {
    "md": render_markdown,
    "json": render_json,
    "html": render_html,
    "bib": render_bib,
}
