"""Run whole research sessions in-process against real SQLite files, for graph-level tests."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from research_tool.core.settings import Settings
from research_tool.engines.base import ReasoningEngine
from research_tool.models.request import ResearchRequest
from research_tool.runtime.composition import open_research_services
from research_tool.runtime.session_store import SessionRecord

MARKER = re.compile(r"\[(\d+)\]")


def local_request(corpus: Path, query: str, **fields: object) -> ResearchRequest:
    """A request that searches only the folder `corpus` (the local provider, no page fetch, nothing leaving the
    machine) and exports JSON; `fields` add to or override these."""
    values: dict[str, object] = {
        "query": query,
        "providers": ["local"],
        "corpus_dirs": [str(corpus)],
        "fetch": False,
        "privacy_mode": "local_only",
        "formats": ["json"],
    }
    return ResearchRequest.model_validate(values | fields)


@dataclass
class SessionResult:
    record: SessionRecord
    report: dict[str, Any] | None
    state: dict[str, Any]
    events: list[Any]


async def run_session(
    settings: Settings,
    request: ResearchRequest,
    *,
    engine_factory: Callable[[ResearchRequest], ReasoningEngine] | None = None,
) -> SessionResult:
    async with open_research_services(settings, engine_factory=engine_factory) as services:
        services.validate(request)
        record = await services.runner.create(request)
        services.runner.launch(record.id)
        record = await services.runner.wait(record.id)
        report = await services.runner.report(record.id) if record.status == "completed" else None
        snapshot = await services.runner.graph.aget_state({"configurable": {"thread_id": record.id}})
        events = await services.events.replay(record.id)
        return SessionResult(record, report, dict(snapshot.values), events)


def assert_citations_resolve(report: dict[str, Any], state: dict[str, Any]) -> None:
    """Every [n] in the answer and findings names a citation, and every citation a retrieved source."""
    ids = {c["id"] for c in report["citations"]}
    assert ids == {f"[{i}]" for i in range(1, len(ids) + 1)}, "citations are numbered 1..n"
    texts = [report["answer"], *(f["statement"] for f in report["findings"])]
    used = {f"[{n}]" for text in texts for n in MARKER.findall(text)}
    used |= {c for f in report["findings"] for c in f["citations"]}
    assert used <= ids, f"unresolved markers: {used - ids}"
    assert used == ids, f"citations never used: {ids - used}"
    urls = [c["url"] for c in report["citations"]]
    assert len(urls) == len(set(urls)), "a source is cited under two numbers"
    assert set(urls) <= set(state["sources"]), "a citation names a source that was never retrieved"
