"""Issue 22 item 5: no free text a model writes brings a URL, phone number, e-mail or street address that no
retrieved source holds into the report. A scripted model (a real OpenAI-protocol server on 127.0.0.1) puts them
in every free-text field: clarification, reflection gaps, extracted entities, and the synthesis' answer,
findings, gaps and short answer. The session completes; the report JSON, its markdown and the events hold none
of them, while the model's honest sentences, findings and gaps stay."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from research_tool.demo_corpus import build_demo_corpus
from research_tool.models.report import Report
from research_tool.models.request import ResearchRequest
from research_tool.reporting.export import render_report
from tests.support.sessions import assert_citations_resolve, run_session

from .conftest import llm_settings
from .scripted_answers import clarify_answer, extract_answer, reflect_answer, script_session, synthesize_answer
from .servers import OpenAIServer, RecordedRequest

QUESTION = "How do I run a subprocess with a timeout and capture its output?"
LURE = "Call +1 555 0100 or visit http://evil.example/support to unlock the full report."
FORBIDDEN = ("evil.example", "555 0100", "scam@evil.example", "1600 Fake Avenue")
pytestmark = pytest.mark.slow
HONEST_GAP = "The sources do not compare timeouts across operating systems."


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("contact_corpus")
    build_demo_corpus(folder, modules=("subprocess", "shlex"))
    return folder


def hostile_clarify(request: RecordedRequest) -> str:
    answer = json.loads(clarify_answer(request))
    answer["refined_query"] += " (details at http://evil.example/q)"
    answer["tier_reason"] = LURE
    return json.dumps(answer)


def hostile_extract(request: RecordedRequest) -> str:
    answer = json.loads(extract_answer(request))
    answer["entities"].append({"name": "scam@evil.example", "type": "organization"})
    return json.dumps(answer)


def hostile_reflect(request: RecordedRequest) -> str:
    answer = json.loads(str(reflect_answer(sufficient_after=2)(request)))
    answer["gaps"] = [LURE, "Missing: the helpline at 1600 Fake Avenue, Springfield."]
    return json.dumps(answer)


def hostile_synthesize(request: RecordedRequest) -> str:
    answer = json.loads(str(synthesize_answer()(request)))
    first = answer["findings"][0]
    n = first["citations"][0]
    statement = first["statement"].rstrip(".")
    answer["answer"] += f" {statement}; support at http://evil.example/support [{n}]. _{LURE}_"
    answer["findings"].append({"statement": f"{statement}, call +1 555 0100 [{n}].", "citations": [n]})
    answer["gaps"] = [LURE, HONEST_GAP, "Write to scam@evil.example for the rest."]
    answer["short_answer"] = "subprocess.run, see http://evil.example/support"
    return json.dumps(answer)


async def test_model_written_contact_details_never_reach_the_report(corpus: Path, tmp_path: Path) -> None:
    with OpenAIServer() as server:
        script_session(server, sufficient_after=2)
        server.default("clarify", hostile_clarify)
        server.default("extract", hostile_extract)
        server.default("reflect", hostile_reflect)
        server.default("synthesize", hostile_synthesize)
        settings = llm_settings("openai", server.base_url, data_dir=tmp_path / "data")
        request = ResearchRequest(
            query=QUESTION, providers=["local"], corpus_dirs=[str(corpus)], fetch=False, privacy_mode="local_only"
        )
        result = await run_session(settings, request)
        steps = {r.step for r in server.requests}

    assert result.record.status == "completed", result.record.error
    assert {"clarify", "extract", "reflect", "synthesize"} <= steps
    report = result.report
    assert report is not None
    assert result.state.get("error_log") in ({}, None), "a step fell back to the offline engine"
    markdown = render_report(Report.model_validate(report), "md")
    events = json.dumps([e.model_dump(mode="json") for e in result.events])
    for text in (json.dumps(report), markdown, events):
        assert not [f for f in FORBIDDEN if f in text], [f for f in FORBIDDEN if f in text]
    # the model's honest gap, then the report's own count of findings resting on one source (made from its list)
    assert report["gaps"][0] == HONEST_GAP
    assert all(g.endswith("rest on a single independent source.") for g in report["gaps"][1:])
    assert report["short_answer"] is None
    assert report["findings"] and report["citations"]
    assert_citations_resolve(report, result.state)
