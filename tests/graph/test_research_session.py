"""Whole sessions through the compiled graph: a cited report from real text, stops for the right reasons."""

from __future__ import annotations

from pathlib import Path

import pytest

from research_tool.core.settings import Settings
from research_tool.engines.base import EngineStep, SynthesisDraft, SynthesisInput
from research_tool.engines.offline import OfflineEngine
from research_tool.models.request import ResearchRequest
from tests.support.sessions import assert_citations_resolve, run_session

QUESTION = "How do I run a subprocess with a timeout and capture its output?"
SATURATION_REASONS = {"fact_saturation", "entity_saturation", "source_coverage", "citation_circularity", "sufficient"}


def local_request(corpus: Path, **overrides: object) -> ResearchRequest:
    fields: dict[str, object] = {
        "query": QUESTION,
        "providers": ["local"],
        "corpus_dirs": [str(corpus)],
        "fetch": False,
    }
    fields.update(overrides)
    return ResearchRequest.model_validate(fields)


async def test_session_writes_a_cited_report_from_local_documents(settings: Settings, stdlib_corpus: Path) -> None:
    result = await run_session(settings, local_request(stdlib_corpus))
    assert result.record.status == "completed", result.record.error
    report = result.report
    assert report is not None
    assert len(report["findings"]) >= 5
    assert len({c["url"] for c in report["citations"]}) >= 3
    assert_citations_resolve(report, result.state)
    assert report["stop_reason"] == result.record.stop_reason
    assert report["saturation"] and report["metadata"]["iterations"] == len(report["saturation"])
    assert all(c["type"] == "local" and c["location"] for c in report["citations"])
    seqs = [e.seq for e in result.events]
    assert seqs == list(range(1, len(seqs) + 1))
    assert result.events[-1].type == "session_completed"
    exports = Path(settings.data_dir) / "exports" / result.record.id
    assert sorted(p.suffix for p in exports.iterdir()) == [".json", ".md"]


async def test_a_corpus_that_runs_out_of_facts_stops_before_max_iterations(
    settings: Settings, stdlib_corpus: Path
) -> None:
    result = await run_session(settings, local_request(stdlib_corpus, tier="deep"))
    report = result.report
    assert report is not None
    assert report["stop_reason"] in SATURATION_REASONS
    assert report["metadata"]["iterations"] < 10


@pytest.mark.parametrize(
    ("overrides", "settings_overrides", "reason"),
    [
        ({"max_iterations": 1}, {}, "max_iterations"),
        ({"max_execution_time_s": 0.001}, {}, "max_execution_time"),
        ({}, {"provider_call_budget": 2}, "provider_call_budget"),
    ],
)
async def test_each_guard_stops_a_real_session_with_its_reason(
    tmp_path: Path,
    stdlib_corpus: Path,
    overrides: dict[str, object],
    settings_overrides: dict[str, object],
    reason: str,
) -> None:
    settings = Settings(data_dir=tmp_path / "data", **settings_overrides)
    result = await run_session(settings, local_request(stdlib_corpus, **overrides))
    assert result.report is not None
    assert result.report["stop_reason"] == reason
    assert_citations_resolve(result.report, result.state)


@pytest.mark.slow
async def test_a_session_whose_providers_all_fail_completes_degraded(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path / "data", wikipedia_base_url="http://127.0.0.1:9")  # discard port: refused
    request = ResearchRequest(
        query="Who designed the Python programming language?", providers=["wikipedia"], fetch=False
    )
    result = await run_session(settings, request)
    assert result.record.status == "completed"
    report = result.report
    assert report is not None
    assert report["stop_reason"] == "all_providers_failed"
    assert report["metadata"]["degraded_mode"] is True
    assert report["metadata"]["access_failures"] >= 1
    assert report["citations"] == []
    assert any(e.type == "provider_error" for e in result.events)


class ForgingEngine(OfflineEngine):
    """The offline engine, plus one sentence citing a source that was never retrieved."""

    async def synthesize(self, request: SynthesisInput) -> EngineStep[SynthesisDraft]:
        step = await super().synthesize(request)
        forged = step.value.answer + " Subprocesses always finish within one second [99]."
        return step.model_copy(update={"value": step.value.model_copy(update={"answer": forged})})


async def test_a_forged_citation_is_caught_and_counted(settings: Settings, stdlib_corpus: Path) -> None:
    result = await run_session(settings, local_request(stdlib_corpus), engine_factory=lambda _: ForgingEngine())
    report = result.report
    assert report is not None
    assert "[99]" not in report["answer"]
    assert "within one second" not in report["answer"]
    assert report["metadata"]["citations_removed"] >= 1
    assert_citations_resolve(report, result.state)
