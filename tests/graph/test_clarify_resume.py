"""Clarification asks once and thinks once per exchange (issue 10 item 10): resuming with the answers does
not make the clarifying model call again, and the questions stored with the answers are the ones shown."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from research_tool.core.settings import Settings
from research_tool.engines.base import EngineStep
from research_tool.engines.offline import OfflineEngine
from research_tool.models.domain import DomainName
from research_tool.models.request import ResearchRequest
from research_tool.runtime.composition import open_research_services


class CountingEngine(OfflineEngine):
    """The offline engine, counting the clarifying calls (each one a model call with an LLM engine)."""

    def __init__(self) -> None:
        super().__init__()
        self.clarified: list[str] = []
        self.applied: list[list[str]] = []

    async def clarify(self, query: str, domain_hint: DomainName | None) -> EngineStep:  # type: ignore[type-arg]
        self.clarified.append(query)
        return await super().clarify(query, domain_hint)

    async def apply_answers(self, query: str, questions: list[str], answers: list[str]) -> EngineStep[str]:
        self.applied.append(list(questions))
        return await super().apply_answers(query, questions, answers)


async def wait_for_status(services: object, session_id: str, status: str) -> list[str]:
    while True:
        record = await services.store.get(session_id)  # type: ignore[attr-defined]
        if record.status == status:
            return list(record.pending_questions)
        assert record.status not in ("completed", "failed"), record
        await asyncio.sleep(0.02)


@pytest.mark.slow
async def test_resume_with_answers_does_not_repeat_the_clarifying_call(settings: Settings, stdlib_corpus: Path) -> None:
    engine = CountingEngine()
    async with open_research_services(settings, engine_factory=lambda request: engine) as services:
        request = ResearchRequest(
            query="Python", clarify=True, providers=["local"], corpus_dirs=[str(stdlib_corpus)], fetch=False
        )
        record = await services.runner.create(request)
        task = services.runner.launch(record.id)
        shown = await asyncio.wait_for(wait_for_status(services, record.id, "awaiting_clarification"), 30)
        assert shown and engine.clarified == ["Python"]

        await services.runner.provide_answers(record.id, ["the programming language", "subprocess timeouts"])
        await asyncio.wait_for(task, 60)

        assert (await services.store.get(record.id)).status == "completed"
        # one clarifying call before asking, one after folding the answers in; none repeated on resume
        assert engine.clarified[0] == "Python" and len(engine.clarified) == 2, engine.clarified
        assert engine.applied == [shown]
        state = (await services.runner.graph.aget_state({"configurable": {"thread_id": record.id}})).values
        clarification = state["clarification"]
        assert clarification["exchanges"] == [
            {"questions": shown, "answers": ["the programming language", "subprocess timeouts"]}
        ]
        assert clarification["asked"] is True and clarification["timed_out"] is False
        assert "subprocess timeouts" in state["refined_query"]
