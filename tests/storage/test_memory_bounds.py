"""Item 13 (flat RSS): a process keeps nothing in memory per finished session. The session cache and the
event log's next-sequence map are the two per-session maps of the runtime that outlive a session; the
runner's handles, the admission queue and the event subscribers go with the session; and the heap pages
the sessions freed are given back (runtime/heap_trim.py)."""

from __future__ import annotations

import gc
from collections import Counter
from pathlib import Path

import pytest

from research_tool.core.settings import Settings
from research_tool.models.request import ResearchRequest
from research_tool.runtime.composition import open_research_services
from research_tool.runtime.heap_trim import HeapTrimmer, trim_available
from tests.support.polling import eventually

from .conftest import QUESTION

WARM_UP_SESSIONS = 3
MEASURED_SESSIONS = 9
# A sqlite3 connection keeps a weak reference to every cursor it made and drops the dead ones every 200
# cursors (CPython's own bound): dead weakrefs rise for about ten sessions, then fall back.
SAWTOOTH_TYPES = {"ReferenceType"}


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


def _object_counts() -> dict[str, int]:
    """Live objects the garbage collector tracks, by type, after a full collection. A plain dict of str to
    int: the collector stops tracking it, so the samples do not count themselves."""
    gc.collect()
    return dict(Counter(type(o).__qualname__ for o in gc.get_objects()))


def _grown_per_session(samples: list[dict[str, int]], sessions_between: int) -> dict[str, int]:
    """Types whose every count in the last three samples exceeds every count in the first three by at least
    one per session in between: what a process keeps per finished session (one dict, one model, one task),
    told apart from counts that swing up and down with whatever the last session left to collect."""
    first, last = samples[:3], samples[-3:]
    grown = {}
    for name in set().union(*last) - SAWTOOTH_TYPES:
        growth = min(c.get(name, 0) for c in last) - max(c.get(name, 0) for c in first)
        if growth >= sessions_between:
            grown[name] = growth
    return grown


@pytest.mark.slow
async def test_finished_sessions_leave_no_object_behind(settings: Settings, small_corpus: Path) -> None:
    """The same small session, one after another: after three to warm the caches up (the same question reads the
    same sources, so the engine's bounded caches stop growing), no type of object gains one per session."""
    samples: list[dict[str, int]] = []
    async with open_research_services(settings) as services:
        for i in range(WARM_UP_SESSIONS + MEASURED_SESSIONS):
            request = ResearchRequest(
                query=QUESTION,
                providers=["local"],
                corpus_dirs=[str(small_corpus)],
                fetch=False,
                clarify=False,
                tier="simple",
                formats=["json"],
            )
            record = await services.runner.create(request)
            services.runner.launch(record.id)
            assert (await services.runner.wait(record.id)).status == "completed"
            if i >= WARM_UP_SESSIONS - 1:
                samples.append(_object_counts())
    # Between the third sample and the third from the end: the sessions a kept object would have added.
    assert _grown_per_session(samples, len(samples) - 5) == {}
