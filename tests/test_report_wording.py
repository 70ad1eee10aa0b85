"""Issue 34, item 3: the header, the notes and the stop reason say one thing everywhere (CLI, md, html, page,
JSON); "stopped early" only when stopping cost the answer; an offline run over local folders names the
unreachable web providers plainly; a local-only offline `run` says `privacy local only`; the compact view."""

from __future__ import annotations

import json
import re
from pathlib import Path

from research_tool import cli
from research_tool.engines.base import NumberedSource, SynthesisInput
from research_tool.engines.offline import OfflineEngine
from research_tool.graph.search_failures import unreachable_providers
from research_tool.models.request import default_privacy
from research_tool.models.stop_reasons import STOP_LABELS, stop_label, stopped_early_note
from research_tool.reporting.export import render_report, render_summary_markdown
from tests.engine.corpus_texts import source
from tests.test_export import make_citation, make_report

REPORT_JS = Path(__file__).resolve().parents[1] / "backend/src/research_tool/api/static/report.js"
KETTLE = source(
    "file:///docs/kettle.md",
    "Electric kettles",
    "An electric kettle boils water with a heating element in its base. "
    "A bimetallic strip switches the kettle off when the steam reaches it.",
)


def test_the_page_uses_the_same_stop_labels_as_the_cli_and_the_exports() -> None:
    block = re.search(r"export const STOP_LABELS = \{(.*?)\};", REPORT_JS.read_text(), re.S)
    assert block is not None
    page = dict(re.findall(r'^\s*(\w+): "([^"]*)",', block.group(1), re.M))
    assert page == STOP_LABELS


def test_md_and_html_headers_say_why_it_stopped_in_words_and_gaps_do_not() -> None:
    report = make_report(stop_reason="max_iterations", gaps=["How are child processes killed?"])
    label = stop_label("max_iterations")
    md, html = render_report(report, "md"), render_report(report, "html")
    assert f"privacy local only · completed: {label}" in md
    assert f"completed: {label}".replace("'", "&#x27;") in html
    assert "max_iterations" not in md and "Stop reason" not in md
    assert cli.completed_line("abc", "max_iterations") == f"Session abc completed: {label}."
    assert json.loads(render_report(report, "json"))["stop_reason"] == "max_iterations"  # JSON keeps the code


def test_stopped_early_only_when_a_limit_cut_an_unanswered_question() -> None:
    assert stopped_early_note("max_iterations", answered=True) is None
    assert stopped_early_note("sufficient", answered=False) is None
    assert stopped_early_note("fact_saturation", answered=False) is None
    note = stopped_early_note("max_execution_time", answered=False)
    assert note is not None and "stopped early (the time limit was reached)" in note


async def test_an_answered_question_at_the_cycle_limit_carries_no_stopped_early_note() -> None:
    request = SynthesisInput(
        query="How does an electric kettle know when to switch off?",
        sources=[NumberedSource(n=1, source=KETTLE)],
        facts=[],
        stop_reason="max_iterations",
    )
    draft = (await OfflineEngine().synthesize(request)).value
    assert draft.answered and "bimetallic strip" in draft.answer
    assert "stopped early" not in draft.answer and not any("Stop reason" in g for g in draft.gaps)

    unanswered = request.model_copy(update={"query": "Who designed the first teapot in Prague in 1620?"})
    draft = (await OfflineEngine().synthesize(unanswered)).value
    assert not draft.answered and "_Research stopped early (the tier's research cycles were all run)" in draft.answer


async def test_unreachable_web_providers_are_named_plainly_when_local_folders_answered() -> None:
    request = SynthesisInput(
        query="How does an electric kettle know when to switch off?",
        sources=[NumberedSource(n=1, source=KETTLE)],
        facts=[],
        degraded_mode=True,
        unreachable_providers=["wikipedia", "duckduckgo"],
    )
    answer = (await OfflineEngine().synthesize(request)).value.answer
    assert "_Not reachable (no network?): wikipedia, duckduckgo; this answer comes from local alone._" in answer
    assert "Degraded mode" not in answer
    nothing = request.model_copy(update={"sources": []})
    assert "Degraded mode" in (await OfflineEngine().synthesize(nothing)).value.answer


def test_unreachable_means_every_search_failed_for_want_of_a_connection() -> None:
    calls = {
        "1": {"provider": "wikipedia", "ok": False, "error_type": "dns"},
        "2": {"provider": "wikipedia", "ok": False, "error_type": "circuit_open"},
        "3": {"provider": "brave", "ok": False, "error_type": "access_denied"},
        "4": {"provider": "arxiv", "ok": False, "error_type": "timeout"},
        "5": {"provider": "arxiv", "ok": True},
        "6": {"provider": "local", "ok": True},
    }
    assert unreachable_providers(calls) == ["wikipedia"]


def test_a_local_only_offline_run_defaults_to_privacy_local_only() -> None:
    assert default_privacy(["local"], "offline") == "local_only"
    assert default_privacy(["local"], "anthropic:claude") == "cloud_allowed"
    assert default_privacy(["local", "wikipedia"], "offline") == "cloud_allowed"
    assert default_privacy(None, "offline") == "cloud_allowed"
    args = cli.build_parser().parse_args(["run", "q", "--providers", "local"])
    assert cli.request_from_args(args, "offline").privacy_mode == "local_only"
    args = cli.build_parser().parse_args(["run", "q", "--providers", "local", "--privacy", "hybrid"])
    assert cli.request_from_args(args, "offline").privacy_mode == "hybrid"


def test_the_compact_view_holds_the_answer_and_its_sources_and_says_where_the_rest_is() -> None:
    citations = [make_citation(n, title=f"Source number {n} " + "long " * 30) for n in range(1, 8)]
    report = make_report(citations, short_answer="subprocess.run(timeout=...)", answer="Use run() [1]. Or [2].")
    text = render_summary_markdown(report, "data/exports/x.md")
    assert "**Short answer:** subprocess.run(timeout=...)" in text and "Use run() [1]. Or [2]." in text
    assert "- [1] **Source number 1" in text and "- [2] " in text and "- [3] " not in text
    assert "Full report (5 more sources, 2 findings, gaps, entities): data/exports/x.md" in text
    assert "Key findings" not in text and "Entities" not in text and "Metadata" not in text
    assert max(len(line) for line in text.splitlines()) < 140  # a source is one short line
    assert len(text.splitlines()) <= 20


def test_entities_are_typed_or_untyped_and_lone_opening_words_are_none() -> None:
    from research_tool.engines.text.entities import extract_entities

    def typed(text: str) -> dict[str, str]:
        return {e.name: e.entity_type for e in extract_entities(text, "file:///x.md", 1)}

    assert typed("Currently the loop runs. Enters the context and waits.") == {}
    assert typed("Trains run from Frankfurt to Paris every hour.") == {"Frankfurt": "place", "Paris": "place"}
    assert typed("The generator is GEN_RUNNING while it runs.") == {}  # a CONSTANT is no name (issue 41)
    assert typed("Scripts written in Python run anywhere.") == {"Python": "concept"}  # a product, as code names are


def test_entity_lines_show_no_other_and_count_in_the_right_number() -> None:
    from research_tool.models.report import ReportEntity

    entities = [
        ReportEntity(name="Frankfurt", type="place", mentions=1, sources=1),
        ReportEntity(name="Popen", type="other", mentions=2, sources=2),
    ]
    md = render_report(make_report(entities=entities), "md")
    assert "- Frankfurt (place; 1 mention in 1 source)" in md
    assert "- Popen (2 mentions in 2 sources)" in md and "other" not in md


def test_findings_off_the_question_come_last_and_are_not_verified() -> None:
    from research_tool.graph.report_assembly import question_first
    from research_tool.models.report import Finding

    citations = [
        make_citation(1, title="csv.reader — Return a reader object which will iterate over lines"),
        make_citation(2, title="pickle.dump — Write a pickled representation of obj to the open file object"),
    ]
    off = Finding(
        statement="If fix_imports is true and protocol is less than 3, pickle maps the new names. [2]",
        citations=["[2]"],
        confidence=0.82,
        verified=True,
    )
    on = Finding(statement="Each iteration returns a row of the CSV file. [1]", citations=["[1]"], confidence=0.6,
                 verified=True)  # fmt: skip
    ordered = question_first([off, on], "How do I read a CSV file in Python?", citations)
    assert [f.statement for f in ordered] == [on.statement, off.statement]
    assert ordered[0].verified is True and ordered[1].verified is False
