"""Report export: md, json (DESIGN §7 exactly), html (source strings inert), bib (escaped entries)."""

from __future__ import annotations

import asyncio
import json
import os
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from research_tool.core.errors import BadInputError
from research_tool.models.entities import Citation
from research_tool.models.report import Finding, Report, ReportEntity, ReportMetadata
from research_tool.reporting.export import (
    EXPORT_FORMATS,
    bib_escape,
    bib_keys,
    export_report,
    render_report,
    write_report,
)

HOSTILE_TITLE = "<script>alert(1)</script>"


def make_citation(n: int, **overrides: object) -> Citation:
    values: dict[str, object] = {
        "id": f"[{n}]",
        "title": f"Source number {n}",
        "url": f"https://example.org/{n}",
        "type": "web",
        "location": "",
        "provider": "brave",
        "authors": [],
        "year": None,
        "doi": None,
        "retrieved_at": "2026-01-02T03:04:05+00:00",
    }
    values.update(overrides)
    return Citation.model_validate(values)


def make_report(citations: list[Citation] | None = None, **overrides: object) -> Report:
    citations = citations if citations is not None else [make_citation(1), make_citation(2)]
    values: dict[str, object] = {
        "session_id": "sess-123",
        "query": "How do I run a subprocess with a timeout?",
        "refined_query": "run subprocess timeout",
        "domain": "technical",
        "tier": "standard",
        "privacy_mode": "local_only",
        "status": "completed",
        "stop_reason": "saturation",
        "answer": "Use subprocess.run with timeout=... [1]. It raises TimeoutExpired [2].\n\nSee also [7].",
        "findings": [
            Finding(
                statement="subprocess.run accepts a timeout [1].",
                citations=["[1]"],
                confidence=0.8,
                verified=True,
                contradictions=["The timeout is ignored [2]."],
            ),
            Finding(statement="TimeoutExpired is raised [2].", citations=["[2]"], confidence=0.6, verified=False),
        ],
        "citations": citations,
        "entities": [ReportEntity(name="TimeoutExpired", type="concept", mentions=3, sources=2)],
        "gaps": ["How are child processes killed?"],
        "saturation": [{"iteration": 1, "new_facts_ratio": 0.5, "stop": False}],
        "metadata": ReportMetadata(
            timestamp="2026-01-02T03:04:05+00:00",
            engine="offline",
            model="offline",
            token_count=0,
            iterations=2,
            duration_s=1.5,
            provider_calls=4,
            access_failures=0,
            degraded_mode=False,
        ),
    }
    values.update(overrides)
    return Report.model_validate(values)


class ScriptFinder(HTMLParser):
    """Records every element and attribute a browser would build from the page."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.event_attrs: list[tuple[str, str]] = []
        self.hrefs: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        for name, value in attrs:
            if name.startswith("on"):
                self.event_attrs.append((name, value or ""))
            if name == "href":
                self.hrefs.append(value or "")

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def parse_html(page: str) -> ScriptFinder:
    finder = ScriptFinder()
    finder.feed(page)
    finder.close()
    return finder


# --- json ---------------------------------------------------------------------------------------


def test_json_is_the_report_model_dump_exactly() -> None:
    report = make_report()
    data = json.loads(render_report(report, "json"))
    assert data == report.model_dump(mode="json")
    assert Report.model_validate(data) == report


# --- html ---------------------------------------------------------------------------------------


def test_html_script_title_is_inert_text() -> None:
    hostile = make_citation(
        1,
        title=HOSTILE_TITLE,
        authors=['<img src=x onerror="alert(2)">'],
        location='notes/"><svg onload=alert(3)>.md',
        url="https://example.org/a?x=<script>",
    )
    report = make_report(
        citations=[hostile, make_citation(2)],
        query="<b onmouseover=alert(4)>q</b>",
        answer=f"{HOSTILE_TITLE} says so [1].",
        gaps=["<iframe src=javascript:alert(5)>"],
    )
    page = render_report(report, "html")
    parsed = parse_html(page)
    assert "script" not in parsed.tags
    assert not {"img", "svg", "iframe", "b"} & set(parsed.tags)
    assert parsed.event_attrs == []
    # The hostile strings are still there, as text a reader can see.
    text = "".join(parsed.text)
    assert HOSTILE_TITLE in text
    assert "<iframe src=javascript:alert(5)>" in text


def test_html_only_http_and_file_urls_become_links() -> None:
    citations = [
        make_citation(1, url="javascript:alert(1)"),
        make_citation(2, url="data:text/html,<script>alert(1)</script>"),
        make_citation(3, url="file:///home/me/notes.md#intro"),
        make_citation(4, url="https://example.org/ok", doi="10.1000/xyz"),
    ]
    parsed = parse_html(render_report(make_report(citations=citations), "html"))
    external = [h for h in parsed.hrefs if not h.startswith("#")]
    assert "file:///home/me/notes.md#intro" in external
    assert "https://example.org/ok" in external
    assert "https://doi.org/10.1000/xyz" in external
    assert all(h.split(":", 1)[0] in {"http", "https", "file"} for h in external)


def test_html_citation_markers_link_to_their_entries() -> None:
    page = render_report(make_report(), "html")
    assert '<a class="cite" href="#cite-1">[1]</a>' in page
    assert '<li id="cite-1"' in page and '<li id="cite-2"' in page
    # [7] names no citation: it stays plain text, not a dead link.
    assert 'href="#cite-7"' not in page
    assert "[7]" in page


# --- markdown -----------------------------------------------------------------------------------


def test_markdown_has_answer_findings_sources_and_defused_tags() -> None:
    report = make_report(citations=[make_citation(1, title=HOSTILE_TITLE, location="docs/a.md#3"), make_citation(2)])
    text = render_report(report, "md")
    assert text.startswith("# How do I run a subprocess with a timeout?")
    assert "## Answer" in text and "Use subprocess.run with timeout=... [1]." in text
    assert "1. subprocess.run accepts a timeout [1]. *(confidence 0.80, verified)*" in text
    assert "Contradicted by: The timeout is ignored [2]." in text
    assert "- [1] **\\<script>alert(1)\\</script>**" in text
    assert "`docs/a.md#3`" in text
    assert "<https://example.org/2>" in text
    assert not re.search(r"(?<!\\)<script", text)


# --- bibtex -------------------------------------------------------------------------------------


def test_bib_escapes_tex_specials() -> None:
    assert bib_escape("50% of R&D_costs {x} $5 #1 ~ ^ \\") == (
        r"50\% of R\&D\_costs \{x\} \$5 \#1 \textasciitilde{} \textasciicircum{} \textbackslash{}"
    )


def test_bib_entries_have_authors_year_doi_url_and_location() -> None:
    citations = [
        make_citation(
            1,
            title="Deep {learning} & 100% of _things_",
            authors=["Yann LeCun", "Bengio, Yoshua"],
            year=2015,
            doi="10.1038/nature14539",
            type="academic",
            provider="semantic_scholar",
        ),
        make_citation(
            2,
            title="subprocess.run",
            type="local",
            provider="local",
            location="subprocess.run.txt",
            url="file:///data/demo/subprocess.run.txt",
        ),
    ]
    bib = render_report(make_report(citations=citations), "bib")
    entries = re.findall(r"^@(\w+)\{([^,]+),", bib, flags=re.MULTILINE)
    assert entries == [("article", "lecun2015deep"), ("misc", "subprocessrun")]
    assert r"title = {{Deep \{learning\} \& 100\% of \_things\_}}" in bib
    assert "author = {Yann LeCun and Bengio, Yoshua}" in bib
    assert "year = {2015}" in bib
    assert "doi = {10.1038/nature14539}" in bib
    assert "url = {file:///data/demo/subprocess.run.txt}" in bib
    assert r"location: subprocess.run.txt" in bib
    unescaped = bib.replace(r"\{", "").replace(r"\}", "")
    assert unescaped.count("{") == unescaped.count("}")


def test_bib_keys_are_unique_and_stable() -> None:
    same = [make_citation(n, title="Timeouts in practice", authors=["Ada Lovelace"], year=1843) for n in (1, 2, 3)]
    other = make_citation(4, title="", authors=[])
    keys = bib_keys([*same, other])
    assert keys == ["lovelace1843timeouts" + s for s in ("a", "b", "c")] + ["ref4"]
    assert bib_keys([*same, other]) == keys


def test_bib_header_cannot_open_an_entry() -> None:
    bib = render_report(make_report(query="mail me@example.org"), "bib")
    assert bib.count("@") == len(re.findall(r"^@\w+\{", bib, flags=re.MULTILINE))


# --- files --------------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", EXPORT_FORMATS)
async def test_export_writes_one_file_per_format(tmp_path: Path, fmt: str) -> None:
    report = make_report(session_id="../evil/id")
    path = await export_report(report, fmt, tmp_path / "exports")
    assert path.parent == tmp_path / "exports"
    assert path.name == f"evil_id.{fmt}"
    assert path.read_text(encoding="utf-8") == render_report(report, fmt)
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temp file left
    # Writing again replaces the file in place.
    assert write_report(report, fmt, tmp_path / "exports") == path
    assert [p.name for p in path.parent.iterdir()] == [path.name]


async def test_unknown_format_is_bad_input(tmp_path: Path) -> None:
    with pytest.raises(BadInputError, match="unknown format 'pdf'"):
        render_report(make_report(), "pdf")
    with pytest.raises(BadInputError):
        await export_report(make_report(), "docx", tmp_path)
    assert await asyncio.to_thread(os.listdir, tmp_path) == []


def test_short_answer_is_the_first_line_under_the_title_in_markdown_and_html() -> None:
    report = make_report(citations=[make_citation(1)]).model_copy(
        update={"short_answer": "subprocess.run(timeout=...)", "answered": True}
    )
    lines = render_report(report, "md").splitlines()
    assert lines[2] == "**Short answer:** subprocess.run(timeout=...)"
    html_text = render_report(report, "html")
    assert html_text.index('class="short-answer"') < html_text.index("<h2>Answer</h2>")
    assert json.loads(render_report(report, "json"))["short_answer"] == "subprocess.run(timeout=...)"


def test_unanswered_report_says_so_on_its_first_line() -> None:
    report = make_report(citations=[make_citation(1)]).model_copy(update={"short_answer": None, "answered": False})
    assert render_report(report, "md").splitlines()[2].startswith("**Not answered:** the sources found do not")
    assert json.loads(render_report(report, "json"))["answered"] is False
