"""The report in the formats a reader asks for: md, json (DESIGN §7), html, bib.

Everything in a report that came from a source (titles, authors, quoted sentences, urls) is data.
The md and html pages are two renderings of one document (`reporting.document`): the markdown
backslash-escapes whatever could start markup, the html escapes every string and only links http(s)
and file urls; the BibTeX escapes TeX's specials and keeps braces balanced; every format drops
control characters.
"""

from __future__ import annotations

import asyncio
import os
import re
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Literal, get_args

from research_tool.core.errors import BadInputError
from research_tool.models.report import Report
from research_tool.reporting.bibtex import bib_escape, bib_keys, render_bib
from research_tool.reporting.document import build_document, build_summary_document, fallback_line
from research_tool.reporting.html import render_document_html
from research_tool.reporting.json_report import render_json
from research_tool.reporting.markdown import render_document_markdown

__all__ = [
    "EXPORT_FORMATS",
    "FILE_SUFFIXES",
    "ExportFormat",
    "bib_escape",
    "bib_keys",
    "check_format",
    "export_report",
    "fallback_line",
    "render_bib",
    "render_html",
    "render_json",
    "render_markdown",
    "render_report",
    "render_summary_markdown",
    "write_report",
]

ExportFormat = Literal["md", "json", "html", "bib"]
EXPORT_FORMATS: tuple[str, ...] = get_args(ExportFormat)
FILE_SUFFIXES: dict[str, str] = {"md": ".md", "json": ".json", "html": ".html", "bib": ".bib"}


def check_format(fmt: str) -> ExportFormat:
    if fmt not in EXPORT_FORMATS:
        raise BadInputError(f"unknown format '{fmt}'; known: {', '.join(EXPORT_FORMATS)}")
    return fmt  # type: ignore[return-value]


def render_markdown(report: Report) -> str:
    return render_document_markdown(build_document(report))


def render_summary_markdown(report: Report, more: str) -> str:
    """The compact view a terminal shows after `run`: answer, short answer, the sources it cites, then `more`."""
    return render_document_markdown(build_summary_document(report, more))


def render_html(report: Report) -> str:
    return render_document_html(build_document(report))


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


_RENDERERS: dict[str, Callable[[Report], str]] = {
    "md": render_markdown,
    "json": render_json,
    "html": render_html,
    "bib": render_bib,
}
