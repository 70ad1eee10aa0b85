"""The runner keeps in-memory handles only for sessions it is running (issue 10 item 9): a server that
runs for months must not keep an entry per finished session."""

from __future__ import annotations

from pathlib import Path

import pytest

from research_tool.core.errors import SessionStateError
from research_tool.core.settings import Settings
from research_tool.models.request import ResearchRequest
from research_tool.runtime.composition import open_research_services

QUESTIONS = ["How do I run a subprocess with a timeout?", "How do I parse a CSV file?", "How is JSON encoded?"]


@pytest.mark.slow
async def test_finished_sessions_leave_no_live_entry(settings: Settings, stdlib_corpus: Path) -> None:
    async with open_research_services(settings) as services:
        runner = services.runner
        finished: list[str] = []
        for question in QUESTIONS:
            request = ResearchRequest(
                query=question, providers=["local"], corpus_dirs=[str(stdlib_corpus)], fetch=False, tier="simple"
            )
            record = await runner.create(request)
            await runner.launch(record.id)
            assert (await services.store.get(record.id)).status == "completed"
            finished.append(record.id)
            assert runner._live == {}
        # Requests about finished sessions do not bring entries back.
        for session_id in finished:
            with pytest.raises(SessionStateError):
                await runner.request_stop(session_id)
            await runner.decline_clarification(session_id)
        assert runner._live == {}
