"""Admission control in the runner: a session's time guard starts when it leaves the queue, and a start
past the queue's capacity is refused with nothing written."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from research_tool.core.errors import ServerBusyError
from research_tool.core.settings import Settings
from research_tool.engines.base import ReasoningEngine
from research_tool.engines.offline import OfflineEngine
from research_tool.models.request import ResearchRequest
from research_tool.runtime.composition import open_research_services

HELD = "held: how do I copy a directory tree with shutil?"
QUEUED_LIMIT_S = 2.0


class HeldEngine(OfflineEngine):
    """Holds its session (and so the only run slot) until the test lets go."""

    def __init__(self, entered: asyncio.Event, release: asyncio.Event) -> None:
        super().__init__()
        self.entered, self.release = entered, release

    async def check(self) -> None:
        self.entered.set()
        await self.release.wait()


def request(query: str, corpus: Path, **extra: object) -> ResearchRequest:
    return ResearchRequest.model_validate(
        {
            "query": query,
            "providers": ["local"],
            "corpus_dirs": [str(corpus)],
            "fetch": False,
            "clarify": False,
            "tier": "simple",
            "max_iterations": 1,
            **extra,
        }
    )


@pytest.mark.slow
async def test_time_queued_does_not_count_against_max_execution_time(tmp_path: Path, stdlib_corpus: Path) -> None:
    entered, release = asyncio.Event(), asyncio.Event()

    def engines(req: ResearchRequest) -> ReasoningEngine:
        return HeldEngine(entered, release) if req.query == HELD else OfflineEngine()

    settings = Settings(_env_file=None, data_dir=tmp_path / "data", max_concurrent_sessions=1)  # type: ignore[call-arg]
    async with open_research_services(settings, engine_factory=engines) as services:
        runner = services.runner
        held = await runner.create(request(HELD, stdlib_corpus))
        runner.launch(held.id)
        await entered.wait()
        queued = await runner.create(
            request("How do I run a subprocess with a timeout?", stdlib_corpus, max_execution_time_s=QUEUED_LIMIT_S)
        )
        runner.launch(queued.id)
        assert runner.admission.queued == 1
        # the queued session waits longer than its whole time budget: that wait is what is under test
        waited_from = time.monotonic()
        await asyncio.sleep(QUEUED_LIMIT_S * 1.25)
        assert (await runner.store.get(queued.id)).status == "queued"
        release.set()
        record = await runner.wait(queued.id)
        assert time.monotonic() - waited_from > QUEUED_LIMIT_S

        assert record.status == "completed", record.error
        assert record.stop_reason != "max_execution_time"
        report = await runner.report(queued.id)
        assert report["metadata"]["budget"]["time_s"]["used"] < QUEUED_LIMIT_S
        assert runner.admission.queued == 0


async def test_a_start_past_the_queue_is_refused_with_nothing_written(tmp_path: Path, stdlib_corpus: Path) -> None:
    entered, release = asyncio.Event(), asyncio.Event()

    def engines(req: ResearchRequest) -> ReasoningEngine:
        return HeldEngine(entered, release) if req.query == HELD else OfflineEngine()

    settings = Settings(  # type: ignore[call-arg]
        _env_file=None, data_dir=tmp_path / "data", max_concurrent_sessions=1, max_queued_sessions=2
    )
    async with open_research_services(settings, engine_factory=engines) as services:
        runner = services.runner
        held = await runner.create(request(HELD, stdlib_corpus))
        runner.launch(held.id)
        await entered.wait()
        waiting = []
        for i in range(2):
            record = await runner.create(request(f"How do I parse arguments with argparse? ({i})", stdlib_corpus))
            runner.launch(record.id)
            waiting.append(record.id)
        with pytest.raises(ServerBusyError) as refused:
            await runner.create(request("How do I write rows to a CSV file?", stdlib_corpus))
        assert 1 <= refused.value.retry_after_s <= 120
        _, total = await runner.store.list_page()
        assert total == 3, "a refused start writes nothing"

        await runner.delete(waiting[0])  # a queued session that goes away frees its place
        assert runner.admission.queued == 1
        accepted = await runner.create(request("How do I write rows to a CSV file?", stdlib_corpus))
        runner.launch(accepted.id)
        release.set()
        for sid in (held.id, waiting[1], accepted.id):
            assert (await runner.wait(sid)).status == "completed"


async def test_with_no_queue_a_start_runs_when_a_slot_is_free_and_is_refused_when_none_is(
    tmp_path: Path, stdlib_corpus: Path
) -> None:
    entered, release = asyncio.Event(), asyncio.Event()

    def engines(req: ResearchRequest) -> ReasoningEngine:
        return HeldEngine(entered, release) if req.query == HELD else OfflineEngine()

    settings = Settings(  # type: ignore[call-arg]
        _env_file=None, data_dir=tmp_path / "data", max_concurrent_sessions=1, max_queued_sessions=0
    )
    async with open_research_services(settings, engine_factory=engines) as services:
        runner = services.runner
        held = await runner.create(request(HELD, stdlib_corpus))
        runner.launch(held.id)
        await entered.wait()
        with pytest.raises(ServerBusyError):
            await runner.create(request("How do I write rows to a CSV file?", stdlib_corpus))
        release.set()
        assert (await runner.wait(held.id)).status == "completed"
        after = await runner.create(request("How do I write rows to a CSV file?", stdlib_corpus))
        runner.launch(after.id)
        assert (await runner.wait(after.id)).status == "completed"
