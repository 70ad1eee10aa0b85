"""The Postgres stores behave as the SQLite ones: sessions, events (gapless across processes, replay,
follow), page texts, provider memory."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from research_tool.core.errors import BadInputError, SessionNotFoundError
from research_tool.models.entities import AccessFailure
from research_tool.models.events import Event
from research_tool.models.request import ResearchRequest
from research_tool.providers.memory import MemoryStore
from research_tool.runtime.postgres.storage import PostgresStorage, open_postgres_storage
from tests.support.polling import eventually


@pytest.fixture
async def pg(pg_url: str) -> AsyncIterator[PostgresStorage]:
    async with open_postgres_storage(pg_url, pool_size=4) as storage:
        yield storage


async def test_sessions_create_get_list_update_delete(pg: PostgresStorage) -> None:
    store = pg.store
    first = await store.create(ResearchRequest(query="first question"), session_id="abc123")
    second = await store.create(ResearchRequest(query="second question", tier="simple"))
    assert (await store.get("abc123")).request == first.request
    assert (await store.get(second.id)).request.tier == "simple"
    assert await store.exists("abc123") and not await store.exists("nope")
    assert await store.resolve("abc") == "abc123"
    records, total = await store.list_page(limit=1)
    assert total == 2 and [r.id for r in records] == [second.id]  # newest first
    assert {r.id for r in await store.active()} == {"abc123", second.id}

    await store.update("abc123", stop_requested=1, status="stopping", progress={"iteration": 2})
    await store.update("abc123", clarify_answers=["yes"], pending_questions=["why?"], awaiting_since=first.created_at)
    got = await store.get("abc123")
    assert got.stop_requested and got.status == "stopping" and got.progress == {"iteration": 2}
    assert got.clarify_answers == ["yes"] and got.pending_questions == ["why?"]
    assert got.awaiting_since == first.created_at and got.created_at == first.created_at
    assert got.updated_at > first.updated_at

    await store.update(second.id, status="completed", stop_reason="saturated")
    assert await store.ids(["completed"]) == {second.id}
    assert await store.status_counts() == {"stopping": 1, "completed": 1}
    assert await store.expired("9999-01-01T00:00:00+00:00") == [second.id]
    assert await store.expired("2000-01-01T00:00:00+00:00") == []

    await store.delete(second.id)
    with pytest.raises(SessionNotFoundError):
        await store.get(second.id)
    with pytest.raises(SessionNotFoundError):
        await store.resolve("zzz")
    await store.create(ResearchRequest(query="third"), session_id="abc999")
    with pytest.raises(BadInputError, match="ambiguous"):
        await store.resolve("abc")


async def test_two_processes_appending_to_one_session_get_gapless_unique_seqs(pg_url: str) -> None:
    """Two pools stand for two processes (e.g. a worker that was presumed dead and the one that took over)."""
    async with (
        open_postgres_storage(pg_url, pool_size=4) as one,
        open_postgres_storage(pg_url, pool_size=4) as two,
    ):

        async def appender(pg: PostgresStorage, name: str) -> list[int]:
            return [(await pg.events.append("s1", "progress", None, f"{name} {i}")).seq for i in range(40)]

        seqs = await asyncio.gather(appender(one, "a"), appender(two, "b"), appender(one, "c"))
        assert sorted(s for part in seqs for s in part) == list(range(1, 121))
        stored = await two.events.replay("s1")
        assert [e.seq for e in stored] == list(range(1, 121))
        assert [e.seq for e in await one.events.replay("s1", after=100)] == list(range(101, 121))
        assert [e.seq for e in await one.events.replay("s1", after=10, limit=3)] == [11, 12, 13]
        assert await one.events.session_ids() == {"s1"}

        await one.events.delete("s1")
        assert await two.events.replay("s1") == []
        assert (await two.events.append("s1", "progress", None, "again")).seq == 1


async def test_follow_replays_then_streams_local_and_notified_events_in_order(pg_url: str) -> None:
    async with (
        open_postgres_storage(pg_url, pool_size=4) as api,
        open_postgres_storage(pg_url, pool_size=4) as worker,
    ):
        await worker.events.append("s2", "session_queued", None, "queued")
        await worker.events.append("s2", "phase_started", "plan", "planning")
        got: list[Event] = []

        async def follow() -> None:
            async for event in api.events.follow("s2", after=1):
                got.append(event)

        follower = asyncio.create_task(follow())
        await eventually(lambda: _true(len(got) == 1))
        await api.events.append("s2", "progress", None, "appended by the API process itself")
        await eventually(lambda: _true(len(got) == 2))
        await worker.events.append("s2", "progress", None, "appended elsewhere")
        await worker.events.append("s2", "progress", None, "appended elsewhere too")
        api.events.notify_local("s2")  # what the cluster's wake-up does
        await eventually(lambda: _true(len(got) == 4))
        await worker.events.append("s2", "session_completed", None, "done", {"export_paths": {}})
        await api.events.append("s2", "progress", None, "a gap after seq 6 makes the follower re-read the table")
        await asyncio.wait_for(follower, 10)
        assert [e.seq for e in got] == [2, 3, 4, 5, 6]
        assert got[-1].type == "session_completed"
        last = await api.events.last_of_type("s2", "session_completed")
        assert last is not None and last.seq == 6 and last.data == {"export_paths": {}}
        # A follower that starts after the end gets nothing and returns.
        assert [e async for e in api.events.follow("s2", after=7)] == []


async def _true(value: bool) -> bool:
    return value


async def test_page_texts_put_get_release_sweep(pg: PostgresStorage) -> None:
    content = pg.content
    keys = await content.put_many("a", {"https://x/1": "one", "https://x/2": "two\x00nul", "https://x/3": "three"})
    await content.put_many("b", {"https://x/1": "one"})
    assert await content.stats() == (3, 3 + 7 + 5)
    found = await content.get_many([("https://x/1", keys["https://x/1"]), ("https://x/2", keys["https://x/2"])])
    assert found == {("https://x/1", keys["https://x/1"]): "one", ("https://x/2", keys["https://x/2"]): "two\ufffdnul"}
    assert await content.get_many([("https://x/1", "0" * 64)]) == {}
    assert await content.sessions_referring() == {"a", "b"}

    assert await content.release(["a"]) == 2  # x/1 is still used by b
    assert await content.stats() == (1, 3)
    assert await content.release(["b"]) == 1
    await content.put_many("c", {"https://x/4": "four"})
    async with pg.pool.connection() as conn:
        await conn.execute("DELETE FROM page_text_refs")
    assert await content.sweep_unreferenced() == 1
    assert await content.stats() == (0, 0)


async def test_provider_memory_ranks_and_lists_failures(pg: PostgresStorage) -> None:
    memory = MemoryStore(pg.memory)
    assert memory.path is None
    await memory.record_results("general", "local", 10)
    await memory.record_citations("general", "local", 5)
    await memory.record_results("general", "wikipedia", 10)
    await memory.record_failure("general", AccessFailure(provider="wikipedia", error_type="timeout", message="slow"))
    await memory.record_failure("general", AccessFailure(provider="arxiv", error_type="http_503", message="down"))
    stats = {s.provider: s for s in await memory.provider_stats("general")}
    assert (stats["local"].calls, stats["local"].results, stats["local"].citations) == (1, 10, 5)
    assert stats["wikipedia"].failures == 1
    ranked = await memory.rank_providers("general", ["wikipedia", "local", "brave"])
    assert ranked[0][0] == "local" and dict(ranked)["brave"] == 0.5
    assert [f.provider for f in await memory.failures()] == ["arxiv", "wikipedia"]
    assert [f.message for f in await memory.failures(provider="wikipedia")] == ["slow"]


async def test_a_failure_message_with_nul_is_stored_cleaned(pg: PostgresStorage) -> None:
    """Issue 32: a session's error or event text may quote what a source or an exception said; Postgres refuses
    NUL in text and JSONB, so the failure itself could not be recorded (psycopg.DataError)."""
    record = await pg.store.create(ResearchRequest(query="a question"))
    await pg.store.update(record.id, status="failed", error="upstream said a\u0000b", progress={"note": "c\u0000d"})
    got = await pg.store.get(record.id)
    assert got.error == "upstream said ab" and got.progress == {"note": "cd"}
    await pg.events.append(record.id, "session_failed", None, "failed: a\u0000b", {"error": "a\u0000b"})
    (event,) = await pg.events.replay(record.id)
    assert event.message == "failed: ab" and event.data == {"error": "ab"}
