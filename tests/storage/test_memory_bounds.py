"""Item 13 (flat RSS): a process keeps nothing in memory per finished session. The session cache and the
event log's next-sequence map are the two per-session maps of the runtime that outlive a session; the
runner's handles, the admission queue and the event subscribers go with the session; and the heap pages
the sessions freed are given back (runtime/heap_trim.py)."""

from __future__ import annotations

from pathlib import Path

from research_tool.core.settings import Settings
from research_tool.models.request import ResearchRequest
from research_tool.runtime.composition import open_research_services
from research_tool.runtime.heap_trim import HeapTrimmer, trim_available
from tests.support.polling import eventually

from .conftest import QUESTION


async def _trimmed(trimmer: HeapTrimmer) -> bool:
    return trimmer.trims >= 1


async def test_finished_sessions_leave_nothing_in_the_session_cache_or_sequence_map(
    settings: Settings, small_corpus: Path
) -> None:
    async with open_research_services(settings) as services:
        ids = []
        for i in range(3):
            request = ResearchRequest(
                query=f"{QUESTION} ({i})",
                providers=["local"],
                corpus_dirs=[str(small_corpus)],
                fetch=False,
                clarify=False,
                tier="simple",
            )
            record = await services.runner.create(request)
            services.runner.launch(record.id)
            ids.append(record.id)
        for sid in ids:
            assert (await services.runner.wait(sid)).status == "completed"
            assert (await services.store.get(sid)).status == "completed"  # a status read after completion
        assert not set(ids) & set(services.store._cache), "finished sessions are read from SQLite"
        assert not set(ids) & set(services.events._next_seq), "a finished log's next seq is read again if needed"
        assert not services.runner._live and not services.runner.admission._waiting
        assert not services.events._fanout.following(), "no follower of a finished session stays subscribed"
        if trim_available():  # what the sessions freed went back to the OS once they had left their slots
            await eventually(lambda: _trimmed(services.runner.heap))
        # Still correct after forgetting: a late event continues the sequence with no gap.
        last = (await services.events.replay(ids[0]))[-1].seq
        assert (await services.events.append(ids[0], "note", None, "late")).seq == last + 1
